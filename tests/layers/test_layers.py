"""fastreid.layers: upstream's layers that the backbones do not already exercise."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fastreid.layers import (
    FRN,
    GELU,
    TLU,
    ContextBlock,
    DropBlock2d,
    DropPath,
    GatherLayer,
    GeneralizedMeanPoolingP,
    MemoryEfficientSwish,
    Mish,
    Non_local,
    SplAtConv2d,
    Swish,
    drop_block_2d,
    make_divisible,
    to_2tuple,
)
from fastreid.layers.frn import bnrelu_to_frn, bnrelu_to_frn2
from fastreid.layers.pooling import ClipGlobalAvgPool, FastGlobalAvgPool
from fastreid.layers.weight_init import lecun_normal_, trunc_normal_, variance_scaling_


def test_activations_compute_their_formulas_and_gradients():
    x = torch.linspace(-4, 4, 101, dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(Mish()(x), x * torch.tanh(F.softplus(x)))
    torch.testing.assert_close(Swish()(x), x * torch.sigmoid(x))
    gelu = 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    torch.testing.assert_close(GELU()(x), gelu)
    # the memory-saving Swish has the same gradient as autograd's
    (g1,) = torch.autograd.grad(MemoryEfficientSwish()(x).sum(), x)
    (g2,) = torch.autograd.grad(Swish()(x).sum(), x)
    torch.testing.assert_close(g1, g2)
    assert torch.autograd.gradcheck(MemoryEfficientSwish(), (x[:10].detach().requires_grad_(),))


def test_drop_regularisers_only_train_and_drop_about_their_share():
    torch.manual_seed(0)
    x = torch.ones(8, 16, 24, 24)
    block = DropBlock2d(drop_prob=0.2, block_size=5, fast=False)
    assert torch.equal(block.eval()(x), x)
    out = block.train()(x)
    dropped = float((out == 0).float().mean())
    assert 0.1 < dropped < 0.35, dropped  # about drop_prob, in whole blocks
    assert float(out.mean()) == pytest.approx(1.0, rel=1e-3)  # rescaled to the same mean
    fast = DropBlock2d(drop_prob=0.2, block_size=5, fast=True).train()(x)
    assert 0.1 < float((fast == 0).float().mean()) < 0.35
    shared = drop_block_2d(x, 0.2, 5, batchwise=True)
    assert torch.equal(shared[0] == 0, shared[1] == 0)  # one mask for the whole batch
    noisy = drop_block_2d(x, 0.2, 5, with_noise=True)
    assert not torch.equal(noisy, x) and (noisy == 1).float().mean() > 0.5
    path = DropPath(0.5).train()(torch.ones(1000, 3))
    kept = path[:, 0] != 0
    assert 0.4 < float(kept.float().mean()) < 0.6 and torch.all(path[kept] == 2.0)
    assert torch.equal(DropPath(0.5).eval()(x), x)


def test_frn_and_tlu_and_the_bn_relu_conversions():
    x = torch.randn(2, 4, 5, 5, dtype=torch.float64)
    frn = FRN(4).double()
    nu2 = x.pow(2).mean(dim=(2, 3), keepdim=True)
    torch.testing.assert_close(frn(x), x / torch.sqrt(nu2 + 1e-6))
    assert "eps" in dict(frn.named_buffers()) and "eps" in dict(
        FRN(4, is_eps_leanable=True).named_parameters()
    )
    assert torch.equal(TLU(4)(x), x.clamp(min=0))  # tau 0 at init

    model = nn.Sequential(
        nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Sequential(nn.BatchNorm2d(4), nn.ReLU())
    )
    bnrelu_to_frn(model)
    assert [type(m).__name__ for m in model.modules()][1:] == [
        "Conv2d",
        "FRN",
        "TLU",
        "Sequential",
        "FRN",
        "TLU",
    ]

    class Block(nn.Module):  # BN and ReLU not siblings in a Sequential: found by running it
        def __init__(self):
            super().__init__()
            self.conv, self.bn, self.relu = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()

        def forward(self, x):
            return self.relu(self.bn(self.conv(x)))

    block = bnrelu_to_frn2(Block(), input_size=(3, 16, 16))
    assert isinstance(block.bn, FRN) and isinstance(block.relu, TLU)
    assert not any(hasattr(m, "is_convert_frn") for m in block.modules())


def test_context_block_starts_as_the_identity_and_learns_context():
    x = torch.randn(2, 8, 6, 4)
    for pooling in ("att", "avg"):
        block = ContextBlock(8, 0.25, pooling, ("channel_add", "channel_mul"))
        with torch.no_grad():
            # add: zero-initialised, so the block is x * sigmoid(mul(context)) at first
            assert block(x).shape == x.shape
    add_only = ContextBlock(8, 0.25)
    torch.testing.assert_close(add_only(x), x)  # last conv zero: the identity at init
    with pytest.raises(ValueError, match="pooling_type"):
        ContextBlock(8, 0.25, "max")
    with pytest.raises(ValueError, match="fusion types"):
        ContextBlock(8, 0.25, fusion_types=("channel_sub",))


def test_gather_layer_in_one_process_keeps_the_gradient():
    x = torch.randn(3, 2, requires_grad=True)
    (gathered,) = GatherLayer.apply(x)
    (gathered * 2).sum().backward()
    assert torch.equal(gathered, x.detach()) and torch.equal(x.grad, torch.full_like(x, 2.0))


def test_helpers():
    assert make_divisible(30) == 32 and make_divisible(3) == 8 and make_divisible(101, 8) == 104
    assert make_divisible(10, 8) == 16  # never more than 10 % below the value
    assert to_2tuple(3) == (3, 3) and to_2tuple((1, 2)) == (1, 2)


def test_split_attention_conv_shapes_and_refusals():
    conv = SplAtConv2d(8, 16, 3, padding=1, bias=False, radix=2, norm_layer="BN")
    assert conv(torch.randn(2, 8, 6, 6)).shape == (2, 16, 6, 6)
    assert sorted(k.split(".")[0] for k in conv.state_dict() if k.endswith("weight")) == [
        "bn0", "bn1", "conv", "fc1", "fc2",
    ]  # fmt: skip
    assert SplAtConv2d(8, 16, 3, padding=1, radix=1)(torch.randn(1, 8, 4, 4)).shape == (1, 16, 4, 4)
    with pytest.raises(ImportError, match="rfconv"):
        SplAtConv2d(8, 16, 3, padding=1, rectify=True)


def test_pooling_takes_upstreams_extra_arguments():
    x = torch.rand(2, 3, 4, 4)
    assert FastGlobalAvgPool(flatten=True)(x).shape == (2, 3)
    assert ClipGlobalAvgPool("ignored", extra=1)(x * 10).max() <= 1
    assert GeneralizedMeanPoolingP(3, (1, 1), 1e-6, "ignored")(x).shape == (2, 3, 1, 1)


def test_initialisers():
    torch.manual_seed(0)
    w = torch.empty(512, 256)
    trunc_normal_(w, std=1.0)
    assert float(w.abs().max()) <= 2.0
    variance_scaling_(w, scale=2.0, mode="fan_in", distribution="uniform")
    assert float(w.var()) == pytest.approx(2.0 / 256, rel=0.05)
    lecun_normal_(w)
    assert float(w.var()) == pytest.approx(1.0 / 256, rel=0.05)
    with pytest.raises(ValueError, match="invalid distribution"):
        variance_scaling_(w, distribution="cauchy")


def test_non_local_reduc_ratio_is_upstreams_no_op():
    for ratio in (2, 4):
        block = Non_local(64, "BN", ratio)
        assert block.g.weight.shape == (1, 64, 1, 1)  # one inner channel, as upstream's released code
    assert Non_local(64, "BN", inter_channels="half").g.weight.shape == (32, 64, 1, 1)
