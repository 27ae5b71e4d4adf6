"""Write ``upstream_edges.json``: what upstream FastReID's own code does at the edges a user mixing
both packages meets (JDAI-CV/fast-reid; the commit is recorded in the file).

    python tests/compat/data/make_upstream_edges.py /path/to/upstream-fastreid

Run in a scratch folder with upstream's checkout first on ``sys.path`` (this script puts it there);
upstream's package needs ``collections.Mapping`` (gone in Python 3.10), stubbed here. Not run by the
suite: ``tests/compat/test_upstream_edges.py`` reads the file. Recorded, per upstream file:

- ``fastreid/config/defaults.py`` (``get_cfg()``): every key with its default, alone and after each
  project's ``add_*_config`` (``projects/FastAttr/fastattr/config.py``,
  ``projects/FastFace/fastface/config.py``, ``projects/FastRetri/fastretri/config.py``,
  ``projects/PartialReID/partialreid/config.py``); ``fastreid/config/config.py``
  (``CfgNode.merge_from_file``, yacs underneath): which one-key YAML files it accepts or refuses;
- ``fastreid/evaluation/rank.py`` (``evaluate_rank``; its Python path, since the Cython module is
  not compiled here; ``rank_cylib/rank_cy.pyx`` returns the same shapes): the return value for both
  metric options on two fixed cases;
- ``fastreid/utils/compute_dist.py`` (``build_dist``, ``compute_jaccard_distance``): the output
  dtype and values for float32, float64 and float16 features;
- ``fastreid/solver/build.py`` (``build_optimizer``): what it returns for Adam, AdamW and SGD, with
  and without gradient clipping and ``contiguous``.
"""

from __future__ import annotations

import collections
import collections.abc
import importlib.util
import json
import os
import pickle
import subprocess
import sys
import tempfile

import numpy as np
import yaml

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "upstream_edges.json")
PROJECTS = {
    "FastAttr": ("projects/FastAttr/fastattr/config.py", "add_attr_config"),
    "FastFace": ("projects/FastFace/fastface/config.py", "add_face_cfg"),
    "FastRetri": ("projects/FastRetri/fastretri/config.py", "add_retri_config"),
    "PartialReID": ("projects/PartialReID/partialreid/config.py", "add_partialreid_config"),
}
# One-key YAML files merged into upstream's get_cfg(): what its yacs takes and refuses.
PROBES = {
    "int for a float default": "SOLVER:\n  BASE_LR: 1\n",
    "float for an int default": "MODEL:\n  HEADS:\n    SCALE: 64.0\n",
    "int for a str default": "MODEL:\n  BACKBONE:\n    DEPTH: 50\n",
    "str for a str default": "MODEL:\n  BACKBONE:\n    DEPTH: 50x\n",
    "list for a tuple default": "DATASETS:\n  NAMES: [DukeMTMC]\n",
    "null for a str default": "MODEL:\n  WEIGHTS: null\n",
    "bool for an int default": "SOLVER:\n  MAX_EPOCH: true\n",
    "unknown key": "DATALOADER:\n  BACKGROUND_GENERATOR: auto\n",
}


def _as_data(cfg) -> dict:
    """A config as plain nested dicts, as its YAML reads back (tuples become lists)."""
    return yaml.safe_load(cfg.dump())


def _load_file(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def record_config(upstream: str) -> dict:
    from fastreid.config import get_cfg

    configs = {"get_cfg": _as_data(get_cfg())}
    for project, (path, function) in PROJECTS.items():
        cfg = get_cfg()
        getattr(_load_file(os.path.join(upstream, path), f"_up_{project}"), function)(cfg)
        configs[project] = _as_data(cfg)
    probes = {}
    with tempfile.TemporaryDirectory() as folder:
        for what, text in PROBES.items():
            path = os.path.join(folder, "probe.yaml")
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            cfg = get_cfg()
            try:
                cfg.merge_from_file(path)
                probes[what] = {"yaml": text, "accepted": True}
            except (KeyError, ValueError) as e:
                probes[what] = {"yaml": text, "accepted": False, "error": type(e).__name__}
    return {"configs": configs, "merge_probes": probes}


def rank_cases() -> dict:
    """Two small cases: each gallery identity with one image (the CUHK03 CMC has no random choice),
    and several images per identity over two cameras. Distances without ties; at least ``max_rank``
    gallery identities (with fewer, upstream's Python CUHK03 CMC is cut at the number of identities
    and its Cython one pads it with zeros: docs/contracts.md)."""
    rng = np.random.default_rng(34)
    single = {
        "distmat": rng.permutation(6 * 10).reshape(6, 10).astype(np.float32) / 60,
        "q_pids": np.array([0, 1, 2, 3, 4, 5]),
        "g_pids": np.arange(10),
        "q_camids": np.zeros(6, np.int64),
        "g_camids": np.ones(10, np.int64),
    }
    multi = {
        "distmat": rng.permutation(8 * 18).reshape(8, 18).astype(np.float32) / 144,
        "q_pids": np.array([0, 1, 2, 3, 4, 5, 0, 1]),
        "g_pids": np.repeat(np.arange(6), 3),
        "q_camids": np.array([0, 0, 0, 0, 1, 1, 1, 1]),
        "g_camids": np.tile(np.array([0, 1, 1]), 6),
    }
    return {"single": single, "multi": multi}


def record_rank() -> dict:
    from fastreid.evaluation.rank import evaluate_rank

    out = {}
    for name, case in rank_cases().items():
        args = [case[k] for k in ("distmat", "q_pids", "g_pids", "q_camids", "g_camids")]
        entry = {"inputs": {k: v.tolist() for k, v in case.items()}}
        for cuhk03 in (False, True):
            np.random.seed(0)
            result = evaluate_rank(*args, max_rank=5, use_metric_cuhk03=cuhk03)
            entry["cuhk03" if cuhk03 else "market1501"] = {
                "type": type(result).__name__,
                "length": len(result),
                "cmc_dtype": str(result[0].dtype),
                "cmc": result[0].tolist(),
                "rest_types": [type(r).__name__ for r in result[1:]],
                "rest": [np.asarray(r, dtype=np.float64).tolist() for r in result[1:]],
            }
        out[name] = entry
    return out


def record_dist() -> dict:
    import torch

    from fastreid.utils import compute_dist as cd

    rng = np.random.default_rng(2034)
    q, g = rng.normal(size=(4, 6)), rng.normal(size=(7, 6))
    out = {"query": q.tolist(), "gallery": g.tolist(), "outputs": {}}
    for dtype in ("float32", "float64", "float16"):
        tq, tg = torch.from_numpy(q).to(getattr(torch, dtype)), torch.from_numpy(g).to(getattr(torch, dtype))
        for metric in ("euclidean", "cosine"):
            dist = cd.build_dist(tq, tg, metric)
            out["outputs"][f"{metric}/{dtype}"] = {
                "dtype": str(dist.dtype),
                "values": dist.astype(np.float64).tolist(),
            }
        # build_dist's jaccard hard-codes a GPU search (search_option=0); the CPU one gives its dtype
        jac = cd.compute_jaccard_distance(torch.cat([tq, tg]).float() if dtype == "float16" else torch.cat([tq, tg]),
                                          k1=3, k2=2, search_option=3)  # fmt: skip
        out["outputs"][f"jaccard/{dtype}"] = {"dtype": str(jac.dtype)}
    return out


def record_optimizer() -> dict:
    import torch

    from fastreid.config import get_cfg
    from fastreid.solver.build import build_optimizer

    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    out = {}
    for name in ("Adam", "AdamW", "SGD"):
        for clip in (False, True):
            for contiguous in (True, False):
                cfg = get_cfg()
                cfg.SOLVER.OPT = name
                cfg.SOLVER.CLIP_GRADIENTS.ENABLED = clip
                result = build_optimizer(cfg, model, contiguous)
                optimizer, wrapper = result
                try:
                    pickle.dumps(optimizer)
                    pickles = True
                except (pickle.PicklingError, AttributeError, TypeError):
                    pickles = False
                out[f"{name}/clip={clip}/contiguous={contiguous}"] = {
                    "type": type(result).__name__,
                    "length": len(result),
                    "class": f"{type(optimizer).__module__}.{type(optimizer).__qualname__}",
                    "torch_class_in_mro": [
                        f"{c.__module__}.{c.__qualname__}"
                        for c in type(optimizer).__mro__
                        if c.__module__.startswith("torch.optim") and c is not torch.optim.Optimizer
                    ],  # fmt: skip
                    "wrapper": type(wrapper).__name__,
                    "param_groups": len(optimizer.param_groups),
                    "fused": optimizer.defaults.get("fused"),
                    "foreach": optimizer.defaults.get("foreach"),
                    "pickles": pickles,
                }
    return out


def main(upstream: str) -> None:
    upstream = os.path.abspath(upstream)
    sys.path.insert(0, upstream)
    for name in ("Mapping", "Sequence", "Iterable", "MutableMapping"):
        setattr(collections, name, getattr(collections.abc, name))
    import fastreid

    assert os.path.dirname(os.path.dirname(os.path.abspath(fastreid.__file__))) == upstream, fastreid.__file__
    try:
        commit = subprocess.run(
            ["git", "-C", upstream, "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout
    except OSError:
        commit = ""
    data = {
        "upstream": "JDAI-CV/fast-reid",
        "commit": commit.strip() or os.environ.get("UPSTREAM_COMMIT", ""),
        "config": record_config(upstream),
        "evaluate_rank": record_rank(),
        "build_dist": record_dist(),
        "build_optimizer": record_optimizer(),
    }
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"written {OUT}")


if __name__ == "__main__":
    main(sys.argv[1])
