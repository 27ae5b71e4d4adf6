"""DropBlock (Ghiasi et al., 2018) and DropPath / stochastic depth (Huang et al., 2016), upstream
FastReID's ``fastreid.layers.drop`` (its signatures, including the noise and batch-wise options).
Training-time regularisers: both return the input unchanged in eval mode."""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn
from torchvision.ops import stochastic_depth

__all__ = ["DropBlock2d", "DropPath", "drop_block_2d", "drop_block_fast_2d", "drop_path"]


def _gamma(
    drop_prob: float, block_size: int, gamma_scale: float, height: int, width: int
) -> tuple[float, int]:
    """The seed rate of block centres that drops about ``drop_prob`` of the activations, and the
    block size clipped to the feature map."""
    clipped = min(block_size, min(width, height))
    valid = max(1, (width - block_size + 1) * (height - block_size + 1))
    return gamma_scale * drop_prob * width * height / clipped**2 / valid, clipped


def _apply_mask(
    x: torch.Tensor, keep: torch.Tensor, with_noise: bool, inplace: bool, batchwise: bool
) -> torch.Tensor:
    """``x`` where ``keep`` is 1; elsewhere Gaussian noise (``with_noise``) or 0 with the kept part
    rescaled to the same mean activation."""
    if with_noise:
        shape = (1, *x.shape[1:]) if batchwise else x.shape
        noise = torch.randn(shape, dtype=x.dtype, device=x.device)
        return x.mul_(keep).add_(noise * (1 - keep)) if inplace else x * keep + noise * (1 - keep)
    scale = (keep.numel() / keep.to(torch.float32).sum().add(1e-7)).to(x.dtype)
    return x.mul_(keep * scale) if inplace else x * keep * scale


def drop_block_2d(
    x: torch.Tensor,
    drop_prob: float = 0.1,
    block_size: int = 7,
    gamma_scale: float = 1.0,
    with_noise: bool = False,
    inplace: bool = False,
    batchwise: bool = False,
) -> torch.Tensor:
    """DropBlock on N x C x H x W ``x``: square blocks of ``block_size`` whose centres lie where a
    whole block fits are zeroed (or filled with noise); ``batchwise`` shares one mask over the batch."""
    _, channels, height, width = x.shape
    gamma, clipped = _gamma(drop_prob, block_size, gamma_scale, height, width)
    rows = torch.arange(height, device=x.device)[:, None]
    cols = torch.arange(width, device=x.device)[None, :]
    half, rest = clipped // 2, (clipped - 1) // 2
    inside = (rows >= half) & (rows < height - rest) & (cols >= half) & (cols < width - rest)
    shape = (1, channels, height, width) if batchwise else x.shape
    seeds = (torch.rand(shape, dtype=x.dtype, device=x.device) < gamma) & inside.to(x.device)
    dropped = F.max_pool2d(seeds.to(x.dtype), kernel_size=clipped, stride=1, padding=clipped // 2)
    return _apply_mask(x, 1 - dropped[..., :height, :width], with_noise, inplace, batchwise)


def drop_block_fast_2d(
    x: torch.Tensor,
    drop_prob: float = 0.1,
    block_size: int = 7,
    gamma_scale: float = 1.0,
    with_noise: bool = False,
    inplace: bool = False,
    batchwise: bool = False,
) -> torch.Tensor:
    """DropBlock without the "whole block fits" restriction on block centres (blocks at the edges
    are cut off): cheaper, nearly the same."""
    _, channels, height, width = x.shape
    gamma, clipped = _gamma(drop_prob, block_size, gamma_scale, height, width)
    shape = (1, channels, height, width) if batchwise else x.shape
    seeds = torch.rand(shape, dtype=x.dtype, device=x.device) < gamma
    dropped = F.max_pool2d(seeds.to(x.dtype), kernel_size=clipped, stride=1, padding=clipped // 2)
    return _apply_mask(x, 1 - dropped[..., :height, :width], with_noise, inplace, batchwise)


class DropBlock2d(nn.Module):
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
        self.drop_prob, self.block_size, self.gamma_scale = drop_prob, block_size, gamma_scale
        self.with_noise, self.inplace, self.batchwise, self.fast = with_noise, inplace, batchwise, fast

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


def drop_path(x: torch.Tensor, drop_prob: float = 0.0, training: bool = False) -> torch.Tensor:
    """Zero whole samples of a residual branch with probability ``drop_prob`` (the others scaled by
    ``1 / (1 - drop_prob)``): torchvision's ``stochastic_depth`` in "row" mode."""
    if drop_prob == 0.0 or not training:
        return x
    return stochastic_depth(x, drop_prob, "row", training=True)


class DropPath(nn.Module):
    def __init__(self, drop_prob: Optional[float] = None) -> None:
        super().__init__()
        self.drop_prob = drop_prob

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return drop_path(x, self.drop_prob or 0.0, self.training)
