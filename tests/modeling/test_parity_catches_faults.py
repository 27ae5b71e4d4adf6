"""The upstream-parity comparisons still catch a real mismatch.

They compare in float64 with a tolerance of ``RELATIVE_TOLERANCE`` (1e-9) of the output's magnitude,
loose enough for any CPU's kernels (measured: at most ~2e-12 under ``ATEN_CPU_CAPABILITY=default``
or oneDNN/MKL forced to AVX2). Each test here plants one small, realistic fault, the kind a one-line
change to a model file makes, and checks that the very comparison the parity tests use rejects it
by a wide margin (the outputs move by more than ``MARGIN`` x the tolerance).
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch
from test_modeling_upstream_parity import assert_outputs_match, build_like_reference, reference_outputs
from test_upstream_backbones import assert_backbone_output_matches, reference_backbone, run_backbone
from torch import nn
from upstream_reference import RELATIVE_TOLERANCE, deterministic_state, load_reference, read_output

MARGIN = 1000  # a fault moves the outputs by at least this many tolerances


def _bn_eps(model: nn.Module) -> None:
    model.backbone.layer2[1].bn2.eps = 1e-4  # one norm's eps 1e-5 -> 1e-4


def _stride_on_the_1x1_conv(model: nn.Module) -> None:
    block = model.backbone.layer2[0]  # ResNet v1's stride placement instead of the 3x3 conv's
    block.conv1.stride, block.conv2.stride = (2, 2), (1, 1)


def _stem_pool_floor(model: nn.Module) -> None:
    model.backbone.maxpool.ceil_mode = False  # upstream pools the stem with ceil_mode=True


def _instance_norm_for_batch_norm(model: nn.Module) -> None:
    block = model.backbone.layer3[0]
    bn = block.bn1
    norm = nn.InstanceNorm2d(bn.num_features, affine=True, eps=bn.eps).to(bn.weight.dtype)
    norm.weight.data.copy_(bn.weight.data)
    norm.bias.data.copy_(bn.bias.data)
    block.bn1 = norm


def _one_channel_dropped(model: nn.Module) -> None:
    def zero_channel(module, inputs, output):
        output = output.clone()
        output[:, 7] = 0
        return output

    model.backbone.layer4[-1].conv3.register_forward_hook(zero_channel)


def _gem_p(model: nn.Module) -> None:
    model.heads.pool_layer.p = 3.1  # GeM's exponent 3 -> 3.1


# fault -> (extra config overrides, change made to the built model)
MODEL_FAULTS: dict[str, tuple[list, Callable[[nn.Module], None] | None]] = {
    "norm eps": ([], _bn_eps),
    "stride on the 1x1 conv": ([], _stride_on_the_1x1_conv),
    "stem max-pool floor": ([], _stem_pool_floor),
    "instance norm for a batch norm": ([], _instance_norm_for_batch_norm),
    "one output channel dropped": ([], _one_channel_dropped),
    "GeM exponent": ([], _gem_p),
    "label smoothing 0.1 -> 0.11": (["MODEL.LOSSES.CE.EPSILON", 0.11], None),
    "triplet margin": (["MODEL.LOSSES.TRI.MARGIN", 0.05], None),
}


def _worst_relative_difference(got: dict, want: dict) -> float:
    pairs = [(got["features"], want["features"]), (got["backbone"], want["backbone"])]
    pairs += [(got["losses"][k].detach(), v) for k, v in want["losses"].items()]
    return max(float((g - w).abs().max()) / max(float(w.abs().max()), 1.0) for g, w in pairs)


@pytest.fixture(scope="module")
def agw():
    """AGW_R50's reference, config and model holding the reference weights (float32, not yet
    calibrated): drawn once for all the faults, each of which works on a copy."""
    ref = load_reference("AGW_R50")
    model, cfg = build_like_reference(ref)
    model.load_state_dict(deterministic_state(ref["keys"]), strict=True)
    return ref, cfg, model


@pytest.mark.slow
@pytest.mark.parametrize("fault", MODEL_FAULTS)
def test_a_planted_model_fault_fails_the_agw_parity_check(agw, fault):
    ref, cfg, reference_model = agw
    overrides, mutate = MODEL_FAULTS[fault]
    if overrides:  # a config fault: built from the changed config, with the reference weights
        model, cfg = build_like_reference({**ref, "overrides": ref["overrides"] + overrides})
        model.load_state_dict(reference_model.state_dict(), strict=True)
    else:
        model = copy.deepcopy(reference_model)
    if mutate is not None:
        mutate(model)
    got = reference_outputs(model, cfg)
    with pytest.raises(AssertionError):
        assert_outputs_match(got, ref)
    assert _worst_relative_difference(got, ref) > MARGIN * RELATIVE_TOLERANCE


def test_a_swapped_ibn_half_fails_the_backbone_parity_check(monkeypatch):
    """IBN-a normalises the first half of the channels by instances: the other half is a fault."""
    from fastreid.layers.batch_norm import IBN

    def swapped(self, x):
        first, second = torch.split(x, [x.shape[1] - self.half_channels, self.half_channels], dim=1)
        return torch.cat((self.BN(first.contiguous()), self.IN(second.contiguous())), dim=1)

    reference = read_output("resnext_50x_ibn")
    model = reference_backbone("resnext_50x_ibn")
    assert_backbone_output_matches(run_backbone(model), reference)  # unfaulted: passes
    monkeypatch.setattr(IBN, "forward", swapped)  # the same model's IBN layers, swapped
    out = run_backbone(model)
    with pytest.raises(AssertionError):
        assert_backbone_output_matches(out, reference)
