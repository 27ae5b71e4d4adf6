"""fastreid.layers where it is not a copy of upstream's numbers (``test_upstream_api_reference.py``
checks those): distributions of the random initialisations and drops, where upstream's code fails
or is wrong (documented in the modules), the all-gather's gradients, and clear errors."""

from __future__ import annotations

import math

import pytest
import torch
from gloo_ranks import run_ranks
from torch import nn

from fastreid.layers import (
    DropBlock2D,
    DropPath,
    GatherLayer,
    Non_local,
    SplAtConv2d,
    drop_block_2d,
    drop_path,
    lecun_normal_,
    trunc_normal_,
    variance_scaling_,
)
from fastreid.layers.context_block import ContextBlock
from fastreid.layers.frn import FRN, TLU, bnrelu_to_frn2


def _truncated_normal_moments(mean: float, std: float, a: float, b: float) -> tuple[float, float]:
    def pdf(x):
        return math.exp(-x * x / 2) / math.sqrt(2 * math.pi)

    def cdf(x):
        return (1 + math.erf(x / math.sqrt(2))) / 2

    alpha, beta = (a - mean) / std, (b - mean) / std
    z = cdf(beta) - cdf(alpha)
    m = mean + std * (pdf(alpha) - pdf(beta)) / z
    var = std**2 * (1 + (alpha * pdf(alpha) - beta * pdf(beta)) / z - ((pdf(alpha) - pdf(beta)) / z) ** 2)
    return m, var


@pytest.mark.parametrize(("mean", "std", "a", "b"), [(0.0, 1.0, -2.0, 2.0), (0.5, 2.0, -1.0, 3.0)])
def test_trunc_normal_has_the_truncated_normal_distribution(mean, std, a, b):
    torch.manual_seed(0)
    x = trunc_normal_(torch.empty(200_000, dtype=torch.float64), mean, std, a, b)
    assert a <= float(x.min()) and float(x.max()) <= b
    m, var = _truncated_normal_moments(mean, std, a, b)
    assert float(x.mean()) == pytest.approx(m, abs=5 * math.sqrt(var / x.numel()))
    assert float(x.var()) == pytest.approx(var, rel=0.02)


def test_variance_scaling_and_lecun_normal_have_the_asked_variance():
    torch.manual_seed(1)
    weight = torch.empty(400, 50, 3, 3, dtype=torch.float64)  # fan in 450, fan out 3600
    for mode, fan in (("fan_in", 450), ("fan_out", 3600), ("fan_avg", 2025)):
        for distribution in ("normal", "truncated_normal", "uniform"):
            variance_scaling_(weight, 2.0, mode, distribution)
            assert float(weight.var()) == pytest.approx(2.0 / fan, rel=0.03), (mode, distribution)
    lecun_normal_(weight)
    assert float(weight.var()) == pytest.approx(1 / 450, rel=0.03)
    # truncated at two standard deviations of the untruncated normal (upstream: at +-2, i.e. not at all)
    assert float(weight.abs().max()) <= 2 / 0.87962566103423978 * math.sqrt(1 / 450) + 1e-12
    with pytest.raises(ValueError, match="invalid distribution"):
        variance_scaling_(weight, distribution="cauchy")
    with pytest.raises(ValueError, match="invalid mode"):
        variance_scaling_(weight, mode="fan_max")


def test_drop_path_drops_whole_samples_and_keeps_the_mean():
    torch.manual_seed(2)
    x = torch.ones(20_000, 3, 2, 2, dtype=torch.float64)
    y = drop_path(x, 0.25, training=True)
    per_sample = y.flatten(1)
    assert set(per_sample.unique().tolist()) <= {0.0, 1 / 0.75}
    assert torch.all(per_sample.min(1).values == per_sample.max(1).values)  # a sample is dropped whole
    assert float((per_sample[:, 0] == 0).float().mean()) == pytest.approx(0.25, abs=0.015)
    assert torch.equal(DropPath().train()(x), x) and torch.equal(DropPath(0.5).eval()(x), x)


def test_drop_block_seeds_whole_blocks_inside_non_square_maps():
    """Upstream lays the valid-seed mask out with height and width swapped; here, on a 5 x 11 map
    with 3 x 3 blocks, every dropped block lies inside the map, so the border rows/columns are
    only dropped next to a block centre one step inside."""
    torch.manual_seed(3)
    x = torch.ones(400, 1, 5, 11, dtype=torch.float64)
    kept = drop_block_2d(x, drop_prob=0.2, block_size=3) != 0
    dropped = ~kept
    assert dropped.any()
    # centres can only be at rows 1..3 and columns 1..9, so each dropped corner has a dropped
    # neighbour inwards
    assert torch.all(dropped[..., 0, 0] <= dropped[..., 1, 1])
    assert torch.all(dropped[..., 4, 10] <= dropped[..., 3, 9])


def test_resnest_dropblock_trains():
    """``DropBlock2D`` is a placeholder raising NotImplementedError upstream; here ResNeSt's
    ``dropblock_prob`` works."""
    conv = SplAtConv2d(8, 4, 3, padding=1, radix=2, norm_layer="BN", dropblock_prob=0.5).train()
    assert isinstance(conv.dropblock, DropBlock2D)
    torch.manual_seed(4)
    conv(torch.randn(2, 8, 7, 7)).sum().backward()
    assert conv.conv.weight.grad is not None


def test_rectified_split_attention_without_rfconv_names_the_package():
    with pytest.raises(ImportError, match="rfconv package.*RFConv"):
        SplAtConv2d(8, 4, 3, padding=1, rectify=True)


def test_non_local_reduction_ratio():
    assert Non_local(16, "BN", 4).inter_channels == 1  # upstream's released block, whatever the ratio
    assert Non_local(16, "BN", 4, inter_channels="half").inter_channels == 4


def test_context_block_rejects_unknown_options():
    with pytest.raises(ValueError, match="pooling_type"):
        ContextBlock(8, 0.25, pooling_type="max")
    with pytest.raises(ValueError, match="channel_sum"):
        ContextBlock(8, 0.25, fusion_types=("channel_sum",))
    with pytest.raises(ValueError, match="at least one"):
        ContextBlock(8, 0.25, fusion_types=())


def test_bnrelu_to_frn2_converts_pairs_upstream_misses():
    """Upstream's version fails on nested Sequentials and leaves a model's last BN before a ReLU
    (converting that ReLU to a TLU of another width)."""
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.Sequential(nn.Conv2d(4, 6, 1), nn.BatchNorm2d(6), nn.ReLU()),
        nn.Conv2d(6, 5, 1),
        nn.BatchNorm2d(5),
        nn.LeakyReLU(),
    )
    model = bnrelu_to_frn2(model, input_size=(3, 8, 8))
    types = [type(m) for m in (model[1], model[2], model[3][1], model[3][2], model[5], model[6])]
    assert types == [FRN, TLU, FRN, TLU, FRN, TLU]
    assert model[6].num_features == 5
    assert not any(hasattr(m, "is_convert_frn") for m in model.modules())
    assert model(torch.randn(2, 3, 8, 8)).shape == (2, 5, 8, 8)


def test_gather_layer_in_one_process_passes_values_and_gradients():
    x = torch.randn(3, 4, requires_grad=True)
    (y,) = GatherLayer.apply(x)
    assert torch.equal(y, x)
    (y * 2).sum().backward()
    assert torch.equal(x.grad, torch.full((3, 4), 2.0))


def _gather_rank(rank: int, world: int) -> tuple:
    x = torch.full((2, 3), float(rank + 1), requires_grad=True)
    gathered = torch.cat(GatherLayer.apply(x), dim=0)
    # each process's loss weighs the rows of every process differently
    weights = torch.arange(1.0, 2 * world + 1).view(-1, 1) * (rank + 1)
    (gathered * weights).sum().backward()
    return gathered.detach(), x.grad.clone()


@pytest.mark.slow
def test_gather_layer_sums_every_process_gradient():
    world = 2
    results = run_ranks(_gather_rank, world)
    expected_rows = torch.cat([torch.full((2, 3), 1.0), torch.full((2, 3), 2.0)])
    for rank in range(world):
        gathered, grad = results[rank]
        assert torch.equal(gathered, expected_rows)
        # d(sum over processes p of (p + 1) * w . gathered) / d x_rank = (1 + 2) * w[rows of rank]
        rows = torch.arange(1.0, 2 * world + 1).view(-1, 1)[2 * rank : 2 * rank + 2]
        assert torch.equal(grad, (3 * rows).expand(2, 3))
