"""Our models against upstream FastReID's released code: the same state-dict keys and shapes, a
strict load of a state dict in upstream's format, and the same eval features, backbone outputs and
training losses on the same weights and input.

The reference data (``data/upstream/``) was written by ``data/make_upstream_reference.py`` running
upstream's own code; each JSON names the upstream commit and source files it came from.
"""

from __future__ import annotations

import os

import pytest
import torch
from upstream_reference import (
    BATCH_TARGETS,
    NUM_CLASSES,
    calibrate_norms,
    deterministic_state,
    load_reference,
    reference_images,
)

from fastreid.config import get_cfg
from fastreid.modeling import build_model

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

WITH_OUTPUTS = [
    "AGW_R50",
    "sbs_R50-ibn",
    "mgn_R50-ibn",
    "clas_R50",
    "vit_small",
    "repvgg_A0",
    "mobilenetv3_Large",
]
KEYS_ONLY = ["bagtricks_R50", "AGW_R101-ibn", "moco_R50", "bagtricks_vit", "repvgg_B1g2", "mobilenetv3_Small"]
SLOW = {"AGW_R101-ibn", "mgn_R50-ibn", "bagtricks_vit", "repvgg_B1g2", "sbs_R50-ibn", "vit_small"}


def _param(name):
    return pytest.param(name, marks=pytest.mark.slow) if name in SLOW else name


def build_like_reference(ref: dict) -> torch.nn.Module:
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(REPO, ref["config"]))
    cfg.merge_from_list(ref["overrides"])
    torch.manual_seed(0)
    return build_model(cfg, log_summary=False), cfg


@pytest.mark.parametrize("name", [_param(n) for n in WITH_OUTPUTS + KEYS_ONLY])
def test_state_dict_keys_and_shapes_match_upstream(name):
    ref = load_reference(name)
    model, _ = build_like_reference(ref)
    got = {k: list(v.shape) for k, v in model.state_dict().items()}
    expected = ref["keys"]
    assert sorted(set(expected) - set(got)) == [], "missing keys"
    assert sorted(set(got) - set(expected)) == [], "unexpected keys"
    assert {k: (got[k], v) for k, v in expected.items() if got[k] != v} == {}
    # a state dict in upstream's format loads strictly
    model.load_state_dict(deterministic_state(expected), strict=True)


@pytest.mark.slow
@pytest.mark.parametrize("name", [_param(n) for n in WITH_OUTPUTS])
def test_features_and_losses_match_upstream(name, monkeypatch):
    ref = load_reference(name)
    model, cfg = build_like_reference(ref)
    model.load_state_dict(deterministic_state(ref["keys"]), strict=True)
    size = cfg.INPUT.SIZE_TEST
    calibration = {"images": reference_images(*size, n=8, seed=7), "targets": torch.arange(8) % NUM_CLASSES}
    calibrate_norms(model, lambda: model(calibration))

    images = reference_images(*size)
    model.eval()
    with torch.no_grad():
        features = model({"images": images})
        backbone = model.backbone(model.preprocess_image(images))
        backbone = backbone.mean(dim=(2, 3)) if backbone.dim() == 4 else backbone

    def close(got, want):
        scale = float(want.abs().max())
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5 * max(scale, 1.0))

    close(backbone, ref["backbone"])
    close(features, ref["features"])
    model.train()
    losses = model({"images": images, "targets": torch.tensor(BATCH_TARGETS)})
    assert sorted(losses) == sorted(ref["losses"])
    for key, value in ref["losses"].items():
        close(losses[key].detach(), value)
    sum(losses.values()).backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


def test_nl_counts_of_released_checkpoints():
    """Upstream's released AGW/SBS checkpoints: 35 (R50) and 77 (R101) NL tensors whose shape
    depends on the inner channels (1 in upstream's code)."""
    for name, count in (("AGW_R50", 35), ("AGW_R101-ibn", 77)):
        keys = load_reference(name)["keys"]
        one_channel = [
            k for k, shape in keys.items() if ".NL_" in k and 1 in shape[:2] and len(shape) in (1, 4)
        ]
        assert len(one_channel) == count, name
        assert keys["backbone.NL_2.0.g.weight"] == [1, 512, 1, 1]
