"""BatchNorm folding: the folded copy gives the unfolded eval model's features, and the model given
is never modified."""

from __future__ import annotations

import os

import pytest
import torch
from torch import nn
from torchvision.ops.misc import FrozenBatchNorm2d

from fastreid.config import get_cfg
from fastreid.modeling import build_model
from fastreid.modeling.bn_folding import fold_batchnorm, foldable_pairs
from fastreid.modeling.compile import optimize_for_inference
from fastreid.utils.precision import decide

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module", autouse=True)
def one_thread(one_torch_thread):
    """Tiny models: one torch thread (see tests/conftest.py)."""


def _trained_looking(model: nn.Module, seed: int = 0) -> nn.Module:
    """BatchNorm statistics and affine values away from their initial identity, so that folding them
    is not a no-op."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.2)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.weight.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.num_features, generator=g) * 0.1)
    return model


def _model(config: str, tiny_resnet18_opts, *extra) -> nn.Module:
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(REPO, "configs", config))
    cfg.merge_from_list([*tiny_resnet18_opts, "MODEL.HEADS.NUM_CLASSES", 5, *extra])
    torch.manual_seed(0)
    return _trained_looking(build_model(cfg, log_summary=False))


def _snapshot(model: nn.Module) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    return float(((a - b).norm(dim=1) / b.norm(dim=1)).max())


@pytest.mark.parametrize(
    ("config", "extra", "expected_pairs"),
    [
        # ResNet-18: stem + 2 per block x 8 blocks + 3 downsample projections; the BNNeck follows pooling
        ("Demo/bagtricks_demo.yml", (), 20),
        # IBN-a: the first norm of a block splits into InstanceNorm + BatchNorm, which stays unfolded
        ("Market1501/bagtricks_R50-ibn.yml", ("MODEL.BACKBONE.WITH_IBN", True), 14),
    ],
)
def test_folded_copy_gives_the_same_features_and_leaves_the_model_alone(
    config, extra, expected_pairs, tiny_resnet18_opts
):
    model = _model(config, tiny_resnet18_opts, *extra)
    model.train()  # the caller's model may be training: folding must not switch it
    before = _snapshot(model)
    norms_before = [type(m) for m in model.modules()]

    folded = fold_batchnorm(model)

    assert model.training
    assert [type(m) for m in model.modules()] == norms_before
    after = model.state_dict()
    assert list(after) == list(before)
    assert all(torch.equal(after[k], v) for k, v in before.items())
    assert len(foldable_pairs(model.eval())) == expected_pairs
    assert sum(isinstance(m, nn.Identity) for m in folded.modules()) >= expected_pairs
    assert not folded.training

    images = torch.rand(4, 3, 64, 32, generator=torch.Generator().manual_seed(1)) * 255
    with torch.no_grad():
        reference = model.eval()({"images": images})
        got = folded({"images": images})
        # float32 rounding of ~20 layers is ~1e-6 relative; 1e-4 leaves a wide margin
        assert _relative_error(got, reference) <= 1e-4
        # in float64 the folding is exact up to float64 rounding
        reference64 = model.double()({"images": images.double()})
        got64 = fold_batchnorm(model)({"images": images.double()})
        assert got64.dtype == torch.float64
        assert _relative_error(got64, reference64) <= 1e-10


def test_optimize_for_inference_is_a_channels_last_copy(tiny_resnet18_opts):
    model = _model("Demo/bagtricks_demo.yml", tiny_resnet18_opts).eval()
    before = _snapshot(model)
    prepared = optimize_for_inference(model, decide("fp32", "cpu", channels_last=True))
    assert prepared is not model
    conv = prepared.backbone.conv1.weight
    assert conv.is_contiguous(memory_format=torch.channels_last)
    assert model.backbone.conv1.weight.is_contiguous()
    assert all(torch.equal(model.state_dict()[k], v) for k, v in before.items())
    plain = optimize_for_inference(model, decide("fp32", "cpu", channels_last=False), fold_bn=False)
    assert plain.backbone.conv1.weight.is_contiguous()
    assert isinstance(plain.backbone.bn1, nn.BatchNorm2d)


class _Branching(nn.Module):
    """A convolution whose output also feeds a second branch (folding would change that branch)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return self.bn(y) + y


class _ScaledConv(nn.Conv2d):
    """A convolution whose forward is not plain Conv2d arithmetic."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return super().forward(input) * 2


def _frozen_norm(channels: int) -> FrozenBatchNorm2d:
    norm = FrozenBatchNorm2d(channels)
    norm.running_mean.uniform_(-0.5, 0.5)
    norm.running_var.uniform_(0.5, 2.0)
    norm.weight.uniform_(0.5, 1.5)
    return norm


def test_only_foldable_pairs_are_folded():
    torch.manual_seed(0)
    model = nn.Sequential(
        _Branching(),
        _ScaledConv(4, 4, 1),
        _trained_looking(nn.Sequential(nn.BatchNorm2d(4))),
        nn.Conv2d(4, 6, 3, bias=False),
        _frozen_norm(6),
        nn.ReLU(),
    ).eval()
    _trained_looking(model[0])
    assert foldable_pairs(model) == [("3", "4")]  # the plain conv + torchvision's FrozenBatchNorm2d
    folded = fold_batchnorm(model)
    assert isinstance(folded[4], nn.Identity) and isinstance(folded[0].bn, nn.BatchNorm2d)
    x = torch.randn(2, 3, 9, 7, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        assert _relative_error(folded(x).flatten(1), model(x).flatten(1)) <= 1e-5


def test_norms_in_training_mode_are_not_folding_candidates():
    model = _trained_looking(nn.Sequential(nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4)))
    assert foldable_pairs(model.train()) == []
    assert foldable_pairs(model.eval()) == [("0", "1")]
