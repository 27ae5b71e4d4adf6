"""IBN-a normalisation: InstanceNorm on the first half of the channels, BatchNorm on the rest."""

from __future__ import annotations

import torch
from torch import nn

from .norm import NormSpec, get_norm

__all__ = ["IBN"]


class IBN(nn.Module):
    """Keys ``IN.*`` (``int(planes / 2)`` channels, affine) and ``BN.*`` (the other channels), as in
    IBN-Net's resnet_ibn_a and upstream FastReID."""

    def __init__(self, planes: int, bn_norm: NormSpec = "BN", **norm_kwargs: object) -> None:
        super().__init__()
        self.half_channels = int(planes / 2)
        self.IN = nn.InstanceNorm2d(self.half_channels, affine=True)
        self.BN = get_norm(bn_norm, planes - self.half_channels, **norm_kwargs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        first, second = torch.split(x, [self.half_channels, x.shape[1] - self.half_channels], dim=1)
        return torch.cat((self.IN(first.contiguous()), self.BN(second.contiguous())), dim=1)
