"""Our models against upstream FastReID's released code: the same state-dict keys and shapes, a
strict load of a state dict in upstream's format, and the same eval features, backbone outputs and
training losses on the same weights and input.

The reference data (``data/upstream/``) was written by ``data/make_upstream_reference.py`` running
upstream's own code; each JSON names the upstream commit and source files it came from. Outputs are
computed and compared in float64, so the comparison holds on any CPU's kernels and still fails for a
one-line model change (``test_parity_catches_faults.py`` plants such changes).
"""

from __future__ import annotations

import os

import pytest
import torch
from upstream_reference import (
    BATCH_TARGETS,
    NUM_CLASSES,
    REFERENCE_DTYPE,
    assert_matches_reference,
    calibrate_norms,
    deterministic_state,
    load_reference,
    meta_state_dict,
    model_keys,
    on_meta_device,
    reference_images,
)

from fastreid.config import CfgNode, get_cfg
from fastreid.modeling import META_ARCH_REGISTRY, build_model

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


def reference_cfg(ref: dict):
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(REPO, ref["config"]))
    cfg.merge_from_list(ref["overrides"])
    return cfg


def build_like_reference(ref: dict) -> tuple[torch.nn.Module, CfgNode]:
    cfg = reference_cfg(ref)
    torch.manual_seed(0)
    return build_model(cfg, log_summary=False), cfg


def build_model_on_meta(cfg: CfgNode) -> torch.nn.Module:
    """``cfg``'s model with meta tensors (shapes and dtypes, no values): what
    ``build_model`` builds before moving it to ``MODEL.DEVICE``, a move meta tensors cannot make."""
    with on_meta_device():
        return META_ARCH_REGISTRY.get(cfg.MODEL.META_ARCHITECTURE)(cfg)


@pytest.mark.parametrize("name", [_param(n) for n in WITH_OUTPUTS + KEYS_ONLY])
def test_state_dict_keys_and_shapes_match_upstream(name):
    # keys and shapes need no values: on the meta device (test_features_and_losses_match_upstream
    # builds the models with outputs for real, through build_model)
    ref = load_reference(name)
    model = build_model_on_meta(reference_cfg(ref))
    got = {k: list(v.shape) for k, v in model.state_dict().items()}
    expected = ref["keys"]
    assert sorted(set(expected) - set(got)) == [], "missing keys"
    assert sorted(set(got) - set(expected)) == [], "unexpected keys"
    assert {k: (got[k], v) for k, v in expected.items() if got[k] != v} == {}
    # a state dict in upstream's format loads strictly (keys and shapes are checked on meta
    # tensors as on real ones)
    model.load_state_dict(meta_state_dict(model_keys(expected)), strict=True)


def reference_outputs(model: torch.nn.Module, cfg) -> dict:
    """What the generator records, computed by our ``model`` (already holding the reference weights)
    the same way: norms calibrated, then eval features, the backbone's output averaged over positions
    and the training losses, all in ``REFERENCE_DTYPE``."""
    model.to(REFERENCE_DTYPE)
    size = cfg.INPUT.SIZE_TEST
    calibration = {"images": reference_images(*size, n=8, seed=7), "targets": torch.arange(8) % NUM_CLASSES}
    calibrate_norms(model, lambda: model(calibration))

    images = reference_images(*size)
    model.eval()
    # the backbone's output as the eval pass computes it (the generator ran the backbone again on
    # ``preprocess_image(images)``: the same call, checked below, without a second forward pass)
    calls = []
    hook = model.backbone.register_forward_hook(lambda m, args, out: calls.append((args, out)))
    try:
        with torch.no_grad():
            features = model({"images": images})
            assert len(calls) == 1, f"the eval pass ran the backbone {len(calls)} times"
            (args, backbone), expected_input = calls[0], model.preprocess_image(images)
            assert len(args) == 1 and torch.equal(args[0], expected_input), "backbone input"
    finally:
        hook.remove()
    backbone = backbone.mean(dim=(2, 3)) if backbone.dim() == 4 else backbone
    model.train()
    losses = model({"images": images, "targets": torch.tensor(BATCH_TARGETS)})
    return {"features": features, "backbone": backbone, "losses": losses}


def assert_outputs_match(got: dict, ref: dict) -> None:
    assert_matches_reference(got["backbone"], ref["backbone"], "backbone output")
    assert_matches_reference(got["features"], ref["features"], "eval features")
    assert sorted(got["losses"]) == sorted(ref["losses"])
    for key, value in ref["losses"].items():
        assert_matches_reference(got["losses"][key].detach(), value, key)


@pytest.mark.slow
@pytest.mark.parametrize("name", [_param(n) for n in WITH_OUTPUTS])
def test_features_and_losses_match_upstream(name):
    ref = load_reference(name)
    model, cfg = build_like_reference(ref)
    model.load_state_dict(deterministic_state(ref["keys"]), strict=True)
    got = reference_outputs(model, cfg)
    assert_outputs_match(got, ref)
    sum(got["losses"].values()).backward()
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
