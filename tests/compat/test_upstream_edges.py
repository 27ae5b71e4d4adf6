"""What this package hands to code written for upstream FastReID, against upstream's own behaviour.

``data/upstream_edges.json`` was written by ``data/make_upstream_edges.py`` from upstream's own code
(JDAI-CV/fast-reid; the commit is in the file): ``get_cfg()`` with its projects' keys and what its
``merge_from_file`` accepts, ``evaluate_rank``, ``build_dist`` and ``build_optimizer``. Nothing here
needs upstream's checkout. Upstream's ``CfgNode.merge_from_file`` is yacs's (plus ``_BASE_``, which a
saved config has none of), so ``upstream_cfg`` rebuilds upstream's ``get_cfg()`` from the recorded
defaults as a yacs node, and ``test_the_stand_in_merges_as_upstream`` checks it takes and refuses
what upstream's did.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from fvcore.common.config import CfgNode as CN
from torch import nn
from yacs.config import CfgNode as YacsNode

from fastreid.config import get_cfg
from fastreid.config.saved import save_config, split_config
from fastreid.evaluation.rank import evaluate_rank
from fastreid.solver import build_optimizer
from fastreid.utils.compute_dist import build_dist

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
UPSTREAM = json.loads((HERE / "data" / "upstream_edges.json").read_text(encoding="utf-8"))


# ------------------------------------------------------------------------------------- config


def upstream_cfg(project: str = "get_cfg") -> YacsNode:
    """Upstream's ``get_cfg()`` (after ``project``'s ``add_*_config`` when one is named), as recorded."""
    return YacsNode(UPSTREAM["config"]["configs"][project])


def _data(node) -> dict:
    return yaml.safe_load(CN(node).dump())


def test_the_stand_in_merges_as_upstream(tmp_path):
    for what, probe in UPSTREAM["config"]["merge_probes"].items():
        path = tmp_path / "probe.yaml"
        path.write_text(probe["yaml"])
        try:
            upstream_cfg().merge_from_file(str(path))
            accepted = True
        except (KeyError, ValueError):
            accepted = False
        assert accepted == probe["accepted"], what


def _package_cfg(config_file: str | None, *opts):
    cfg = get_cfg()
    if config_file:
        cfg.merge_from_file(str(REPO / config_file))
    cfg.merge_from_list(list(opts))
    return cfg


LOOSER = ("MODEL.PRECISION", "fp32", "SOLVER.PLATEAU.ENABLED", True, "SEED", 7, "MODEL.HEADS.SCALE", 64.0)
# (config file, overrides, upstream's project whose add_*_config its train_net calls first)
RUNS = {
    "defaults": (None, (), "get_cfg"),
    "shipped re-ID config": ("configs/Market1501/bagtricks_R50.yml", ("SOLVER.MAX_ITER", 40), "get_cfg"),
    "fastreid's keys and looser types": (
        "configs/Market1501/AGW_R50.yml",
        (*LOOSER, "MODEL.BACKBONE.DEPTH", 101, "DATALOADER.PIN_MEMORY", False),
        "get_cfg",
    ),
    "attribute family": ("configs/Attr/pa100.yml", ("TEST.THRES", 0.4), "FastAttr"),
}


@pytest.mark.parametrize("name", list(RUNS))
def test_saved_config_merges_into_upstreams_get_cfg_unchanged(name, tmp_path):
    config_file, opts, project = RUNS[name]
    cfg = _package_cfg(config_file, *opts)
    path, _ = save_config(cfg, str(tmp_path / "config.yaml"))

    theirs = upstream_cfg(project)
    theirs.merge_from_file(path)  # upstream's merge: raises on any key or type it does not take
    assert _data(theirs) == _data(split_config(cfg)[0])  # every upstream key with the run's value


def test_an_inline_dump_is_what_upstream_refused(tmp_path):
    """The reason for the split: the whole config in one file has keys upstream does not know."""
    path = tmp_path / "config.yaml"
    path.write_text(get_cfg().dump())
    with pytest.raises(KeyError, match="DATALOADER"):
        upstream_cfg().merge_from_file(str(path))


# ------------------------------------------------------------------------------- evaluate_rank


def _rank_args(case: dict) -> list[np.ndarray]:
    inputs = case["inputs"]
    return [np.asarray(inputs["distmat"], np.float32)] + [
        np.asarray(inputs[k], np.int64) for k in ("q_pids", "g_pids", "q_camids", "g_camids")
    ]


@pytest.mark.parametrize("case", sorted(UPSTREAM["evaluate_rank"]))
@pytest.mark.parametrize("protocol", ["market1501", "cuhk03"])
def test_evaluate_rank_returns_upstreams_shape(case, protocol):
    want = UPSTREAM["evaluate_rank"][case][protocol]
    got = evaluate_rank(
        *_rank_args(UPSTREAM["evaluate_rank"][case]), max_rank=5, use_metric_cuhk03=protocol == "cuhk03"
    )
    assert isinstance(got, tuple) and len(got) == want["length"]
    cmc, *rest = got  # upstream's callers unpack it: cmc, mAP = ... / cmc, all_AP, all_INP = ...
    assert str(cmc.dtype) == want["cmc_dtype"] and len(cmc) == len(want["cmc"])
    if protocol == "market1501" or case == "single":  # the CUHK03 CMC draws at random with several images
        np.testing.assert_allclose(cmc, want["cmc"], rtol=0, atol=1e-6)
    if protocol == "cuhk03":
        (m_ap,) = rest
        assert isinstance(m_ap, float) and type(m_ap).__name__ == want["rest_types"][0]  # numpy float64
        assert m_ap == pytest.approx(want["rest"][0], abs=1e-9)
    else:
        for ours, theirs in zip(rest, want["rest"]):  # per-query AP and INP
            np.testing.assert_allclose(np.asarray(ours, np.float64), theirs, rtol=0, atol=1e-9)


# ---------------------------------------------------------------------------------- build_dist


@pytest.mark.parametrize("metric", ["euclidean", "cosine", "jaccard"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_build_dist_keeps_upstreams_output_dtype(metric, dtype):
    rec = UPSTREAM["build_dist"]
    want = rec["outputs"][f"{metric}/{dtype}"]
    q, g = (torch.tensor(rec[k], dtype=getattr(torch, dtype)) for k in ("query", "gallery"))
    got = build_dist(q, g, metric, k1=3, k2=2)
    assert str(got.dtype) == want["dtype"]
    if "values" in want:  # the same distances, to the precision of the dtype
        theirs = np.asarray(want["values"])
        tol = (1e-12 if dtype == "float64" else 1e-5) * max(1.0, float(np.abs(theirs).max()))
        np.testing.assert_allclose(got, theirs, rtol=0, atol=tol)


def test_build_dist_of_half_precision_features_is_float32_where_upstream_keeps_float16():
    """A deliberate difference (docs/contracts.md): float16 distances tie."""
    rec = UPSTREAM["build_dist"]
    assert rec["outputs"]["cosine/float16"]["dtype"] == "float16"  # upstream's
    q, g = (torch.tensor(rec[k], dtype=torch.float16) for k in ("query", "gallery"))
    assert build_dist(q, g, "cosine").dtype == np.float32


# ----------------------------------------------------------------------------- build_optimizer


def _optimizer_case(key: str):
    name, clip, contiguous = (part.split("=")[-1] for part in key.split("/"))
    cfg = get_cfg()
    cfg.SOLVER.OPT = name
    cfg.SOLVER.CLIP_GRADIENTS.ENABLED = clip == "True"
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    return build_optimizer(cfg, model, contiguous == "True")


@pytest.mark.parametrize("key", sorted(UPSTREAM["build_optimizer"]))
def test_build_optimizer_returns_upstreams_pair_of_torch_classes(key):
    want = UPSTREAM["build_optimizer"][key]
    result = _optimizer_case(key)
    assert type(result).__name__ == want["type"] and len(result) == want["length"]
    optimizer, param_wrapper = result
    assert f"{type(optimizer).__module__}.{type(optimizer).__qualname__}" == want["class"]
    torch_classes = [
        f"{c.__module__}.{c.__qualname__}"
        for c in type(optimizer).__mro__
        if c.__module__.startswith("torch.optim") and c is not torch.optim.Optimizer
    ]
    assert torch_classes == want["torch_class_in_mro"]
    try:
        pickle.dumps(optimizer)
        pickles = True
    except (pickle.PicklingError, AttributeError, TypeError):
        pickles = False
    assert pickles == want["pickles"]
    # deliberate differences (docs/contracts.md): no ContiguousParams, so one group per parameter as
    # upstream's contiguous=False; the fused kernel for CPU parameters
    assert param_wrapper is None
    assert (
        len(optimizer.param_groups)
        == UPSTREAM["build_optimizer"][key.replace("contiguous=True", "contiguous=False")]["param_groups"]
    )
