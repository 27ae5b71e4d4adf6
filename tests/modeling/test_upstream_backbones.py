"""Backbones against upstream FastReID's own modules: state-dict keys and shapes, strict loading of
upstream-format weights, and eval outputs on the same input with the same weights.

The reference files in ``data/upstream/`` were written by ``data/make_upstream_reference.py``
running upstream's code (file and commit named in each file); nothing here imports upstream.
"""

from __future__ import annotations

import pytest
import torch
from upstream_reference import (
    CASES,
    REFERENCE_DTYPE,
    assert_matches_reference,
    deterministic_state_dict,
    meta_state_dict,
    on_meta_device,
    read_keys,
    read_output,
    reference_input,
    sample_positions,
)

from fastreid.config import get_cfg
from fastreid.modeling import build_backbone, build_model

SLOW_CASES = {
    "resnest_101x",
    "resnest_200x",
    "resnest_269x",
    "resnext_101x_ibn",
    "regnet_4000x",
    "regnet_4000y",
    "regnet_6400x",
    "regnet_6400y",
    "regnet_3200x",
    "regnet_3200y",
    "effnet_b3",
    "effnet_b4",
    "effnet_b5",
    "shufflenetv2_2.0x",
}


def _params(cases):
    return [pytest.param(c, marks=pytest.mark.slow) if c in SLOW_CASES else c for c in cases]


def backbone_cfg(overrides: dict):
    cfg = get_cfg()
    cfg.MODEL.DEVICE = "cpu"
    cfg.MODEL.BACKBONE.PRETRAIN = False
    for key, value in overrides.items():
        setattr(cfg.MODEL.BACKBONE, key, value)
    return cfg


@pytest.mark.parametrize("case", _params(CASES))
def test_state_dict_matches_upstream_and_loads_strictly(case):
    # keys, shapes and dtypes need no values: built on the meta device, the 100M-parameter nets
    # cost no weight initialisation (test_eval_output_matches_upstream builds real ones)
    overrides, _ = CASES[case]
    with on_meta_device():
        model = build_backbone(backbone_cfg(overrides))
    expected = read_keys(case)
    ours = {k: (tuple(v.shape), v.dtype) for k, v in model.state_dict().items()}
    assert sorted(set(expected) - set(ours)) == [], "keys upstream has and we lack"
    assert sorted(set(ours) - set(expected)) == [], "keys we have and upstream lacks"
    wrong = {k: (ours[k], expected[k]) for k in expected if ours[k] != expected[k]}
    assert wrong == {}
    # a checkpoint written from upstream's key list loads strictly (keys and shapes are checked
    # on meta tensors as on real ones)
    model.load_state_dict(meta_state_dict(expected), strict=True)


def reference_backbone(case: str) -> torch.nn.Module:
    """Our backbone for ``case`` with the reference weights, in eval mode and ``REFERENCE_DTYPE``."""
    overrides, _ = CASES[case]
    model = build_backbone(backbone_cfg(overrides)).eval().to(REFERENCE_DTYPE)
    model.load_state_dict(deterministic_state_dict(read_keys(case)), strict=True)
    return model


def run_backbone(model: torch.nn.Module) -> torch.Tensor:
    """``model``'s output on ``reference_input()``, as the generator ran upstream's."""
    with torch.no_grad():
        return model(reference_input().to(REFERENCE_DTYPE))


def assert_backbone_output_matches(out: torch.Tensor, reference: dict) -> None:
    assert tuple(out.shape) == tuple(reference["shape"])
    flat = out.reshape(-1)
    what = f"vs upstream ({reference['source']})"
    assert_matches_reference(flat[sample_positions(flat.numel())], reference["values"], what)
    # every position counts in the sums; in double they agree as closely as the values
    sums = torch.tensor([flat.sum().item(), flat.abs().sum().item()], dtype=torch.float64)
    want = torch.tensor([reference["sum"], reference["abs_sum"]], dtype=torch.float64)
    assert_matches_reference(sums, want, f"sum and sum of magnitudes {what}")


@pytest.mark.parametrize("case", _params(c for c, (_, with_output) in CASES.items() if with_output))
def test_eval_output_matches_upstream(case):
    assert_backbone_output_matches(run_backbone(reference_backbone(case)), read_output(case))


# one small variant per family: (MODEL.BACKBONE overrides, FEAT_DIM)
TRAINABLE = {
    "resnest": ({"NAME": "build_resnest_backbone", "DEPTH": "50x"}, 2048),
    "resnext_ibn": ({"NAME": "build_resnext_backbone", "DEPTH": "50x", "WITH_IBN": True}, 2048),
    "regnet": ({"NAME": "build_regnet_backbone", "DEPTH": "200y"}, 368),
    "effnet": ({"NAME": "build_effnet_backbone", "DEPTH": "b0"}, 1280),
    "mobilenetv2": ({"NAME": "build_mobilenetv2_backbone", "DEPTH": "0.5x"}, 1280),
    "shufflenetv2": ({"NAME": "build_shufflenetv2_backbone", "DEPTH": "0.5x"}, 1024),
    "osnet_ibn": ({"NAME": "build_osnet_backbone", "DEPTH": "x0_25", "WITH_IBN": True}, 128),
}


@pytest.mark.parametrize("family", TRAINABLE)
def test_baseline_builds_and_trains_one_step(family):
    overrides, feat_dim = TRAINABLE[family]
    cfg = backbone_cfg(overrides)
    cfg.MODEL.BACKBONE.FEAT_DIM = feat_dim
    cfg.MODEL.HEADS.NUM_CLASSES = 2
    cfg.MODEL.HEADS.WITH_BNNECK = True
    cfg.MODEL.LOSSES.NAME = ("CrossEntropyLoss", "TripletLoss")
    torch.manual_seed(0)
    model = build_model(cfg, log_summary=False)
    batch = {
        "images": torch.randint(0, 256, (4, 3, 64, 32), dtype=torch.uint8),
        "targets": torch.tensor([0, 0, 1, 1]),
        "camids": torch.tensor([0, 1, 0, 1]),
        "img_paths": ["a", "b", "c", "d"],
    }
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    before = [p.detach().clone() for p in model.backbone.parameters()]
    losses = model.train()(batch)
    total = sum(losses.values())
    assert torch.isfinite(total)
    optimizer.zero_grad()
    total.backward()
    optimizer.step()
    changed = sum(not torch.equal(b, p) for b, p in zip(before, model.backbone.parameters()))
    assert changed > 0.5 * len(before), "most backbone parameters should train"
    with torch.no_grad():
        feats = model.eval()(batch)
    assert feats.shape == (4, feat_dim) and torch.isfinite(feats).all()


@pytest.mark.parametrize("config", ["bagtricks_S50.yml", "AGW_S50.yml", "sbs_S50.yml"])
def test_upstream_s50_configs_train_one_step(config):
    import os

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(repo, "configs", "Market1501", config))
    cfg.merge_from_list(
        ["MODEL.DEVICE", "cpu", "MODEL.BACKBONE.PRETRAIN", False, "MODEL.HEADS.NUM_CLASSES", 2]
    )
    torch.manual_seed(0)
    model = build_model(cfg, log_summary=False)
    assert type(model.backbone).__name__ == "ResNeSt"
    batch = {
        "images": torch.randint(0, 256, (4, 3, 64, 32), dtype=torch.uint8),
        "targets": torch.tensor([0, 0, 1, 1]),
        "camids": torch.tensor([0, 1, 0, 1]),
        "img_paths": ["a", "b", "c", "d"],
    }
    losses = model.train()(batch)
    total = sum(losses.values())
    assert torch.isfinite(total)
    total.backward()
    assert model.backbone.conv1[0].weight.grad is not None


@pytest.mark.parametrize("family", TRAINABLE)
def test_norm_and_norm_split_reach_every_norm_layer(family):
    from fastreid.layers import GhostBatchNorm

    overrides, _ = TRAINABLE[family]
    model = build_backbone(backbone_cfg({**overrides, "NORM": "GhostBN", "NORM_SPLIT": 2}))
    ghosts = [m for m in model.modules() if isinstance(m, GhostBatchNorm)]
    plain = [m for m in model.modules() if type(m) is torch.nn.BatchNorm2d]
    assert ghosts and all(m.num_splits == 2 for m in ghosts)
    if family == "mobilenetv2":  # upstream hard-codes BatchNorm2d after each expanding block's projection
        assert len(plain) == 16
    else:
        assert plain == []
    model.train()(torch.randn(4, 3, 64, 32)).mean().backward()
