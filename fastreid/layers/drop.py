"""Structured dropout: DropBlock (Ghiasi et al., 2018) and DropPath / stochastic depth (Huang et
al., 2016), under upstream FastReID's names (which are timm's).

DropBlock zeroes square blocks of a feature map instead of single activations. ``drop_block_2d``
seeds blocks only where a whole block fits inside the map; ``drop_block_fast_2d`` seeds them
anywhere (cheaper). Both rescale the kept activations so their expected sum is unchanged, or, with
``with_noise``, fill the dropped blocks with Gaussian noise instead. Their random draws are the
same as upstream's, so a seeded generator gives upstream's masks on square maps. (Upstream lays out
the valid-seed mask of ``drop_block_2d`` with width and height swapped, which only matters for
non-square maps; here it follows the map.)

DropPath drops a whole residual branch per sample: torchvision's ``stochastic_depth`` in "row" mode.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torchvision.ops import stochastic_depth

__all__ = ["drop_block_2d", "drop_block_fast_2d", "DropBlock2d", "drop_path", "DropPath"]


def _seed_rate(
    drop_prob: float, block_size: int, gamma_scale: float, height: int, width: int, clipped: int
) -> float:
    """Probability that a position seeds a dropped block, so that about ``drop_prob`` of the map
    is dropped (DropBlock's gamma)."""
    valid_seeds = (width - block_size + 1) * (height - block_size + 1)
    return gamma_scale * drop_prob * height * width / clipped**2 / valid_seeds


def _uniform_noise(x: torch.Tensor, batchwise: bool) -> torch.Tensor:
    """One draw per position, shared by the whole batch when ``batchwise``."""
    if batchwise:
        return torch.rand((1, *x.shape[1:]), dtype=x.dtype, device=x.device)
    return torch.rand_like(x)


def _normal_noise(x: torch.Tensor, batchwise: bool) -> torch.Tensor:
    if batchwise:
        return torch.randn((1, *x.shape[1:]), dtype=x.dtype, device=x.device)
    return torch.randn_like(x)


def _apply_keep_mask(
    x: torch.Tensor, keep: torch.Tensor, with_noise: bool, inplace: bool, batchwise: bool
) -> torch.Tensor:
    """``x`` where ``keep`` is 1; elsewhere noise (``with_noise``) or 0 with the rest rescaled."""
    if with_noise:
        noise = _normal_noise(x, batchwise) * (1 - keep)
        return x.mul_(keep).add_(noise) if inplace else x * keep + noise
    scale = (keep.numel() / keep.to(torch.float32).sum().add(1e-7)).to(x.dtype)
    return x.mul_(keep * scale) if inplace else x * keep * scale


def _spread(seeds: torch.Tensor, size: int, height: int, width: int) -> torch.Tensor:
    """Every seed grown into a ``size`` x ``size`` block (a stride-1 max pool), cropped to the map."""
    return F.max_pool2d(seeds, kernel_size=size, stride=1, padding=size // 2)[..., :height, :width]


def drop_block_2d(
    x: torch.Tensor,
    drop_prob: float = 0.1,
    block_size: int = 7,
    gamma_scale: float = 1.0,
    with_noise: bool = False,
    inplace: bool = False,
    batchwise: bool = False,
) -> torch.Tensor:
    """DropBlock of an N x C x H x W map, blocks seeded only where they fit inside the map."""
    _, _, height, width = x.shape
    clipped = min(block_size, height, width)
    gamma = _seed_rate(drop_prob, block_size, gamma_scale, height, width, clipped)
    rows = torch.arange(height, device=x.device).view(height, 1)
    cols = torch.arange(width, device=x.device).view(1, width)
    low, high = clipped // 2, (clipped - 1) // 2
    valid = (rows >= low) & (rows < height - high) & (cols >= low) & (cols < width - high)
    valid = valid.view(1, 1, height, width).to(x.dtype)
    noise = _uniform_noise(x, batchwise)
    # a position is a seed (0 in the keep mask) when it is valid and its draw is below gamma
    keep_seeds = ((2 - gamma - valid + noise) >= 1).to(x.dtype)
    keep = -_spread(-keep_seeds, clipped, height, width)
    return _apply_keep_mask(x, keep, with_noise, inplace, batchwise)


def drop_block_fast_2d(
    x: torch.Tensor,
    drop_prob: float = 0.1,
    block_size: int = 7,
    gamma_scale: float = 1.0,
    with_noise: bool = False,
    inplace: bool = False,
    batchwise: bool = False,
) -> torch.Tensor:
    """DropBlock of an N x C x H x W map, blocks seeded anywhere (also near the border)."""
    _, _, height, width = x.shape
    clipped = min(block_size, height, width)
    gamma = _seed_rate(drop_prob, block_size, gamma_scale, height, width, clipped)
    seeds = (_uniform_noise(x, batchwise) < gamma).to(x.dtype)
    keep = 1 - _spread(seeds, clipped, height, width)
    return _apply_keep_mask(x, keep, with_noise, inplace, batchwise)


class DropBlock2d(nn.Module):
    """DropBlock in training mode (identity in eval mode or with ``drop_prob`` 0)."""

    def __init__(
        self,
        drop_prob: float = 0.1,
        block_size: int = 7,
        gamma_scale: float = 1.0,
        with_noise: bool = False,
        inplace: bool = False,
        batchwise: bool = False,
        fast: bool = True,
    ) -> None:
        super().__init__()
        self.drop_prob = drop_prob
        self.gamma_scale = gamma_scale
        self.block_size = block_size
        self.with_noise = with_noise
        self.inplace = inplace
        self.batchwise = batchwise
        self.fast = fast

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or not self.drop_prob:
            return x
        drop = drop_block_fast_2d if self.fast else drop_block_2d
        return drop(
            x,
            self.drop_prob,
            self.block_size,
            self.gamma_scale,
            self.with_noise,
            self.inplace,
            self.batchwise,
        )

    def extra_repr(self) -> str:
        return f"drop_prob={self.drop_prob}, block_size={self.block_size}, fast={self.fast}"


def drop_path(x: torch.Tensor, drop_prob: float = 0.0, training: bool = False) -> torch.Tensor:
    """Zero each sample's ``x`` with probability ``drop_prob`` and scale the others by
    ``1 / (1 - drop_prob)`` in training; ``x`` unchanged otherwise."""
    if not drop_prob or not training:
        return x
    return stochastic_depth(x, drop_prob, "row", training=True)


class DropPath(nn.Module):
    """:func:`drop_path` as a module (per-sample stochastic depth of a residual branch)."""

    def __init__(self, drop_prob: float | None = None) -> None:
        super().__init__()
        self.drop_prob = drop_prob

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return drop_path(x, self.drop_prob or 0.0, self.training)

    def extra_repr(self) -> str:
        return f"drop_prob={self.drop_prob}"
