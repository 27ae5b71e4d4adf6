"""Split-attention convolution of ResNeSt (Zhang et al., 2020), upstream FastReID's
``fastreid.layers.splat``: a grouped convolution producing ``radix`` feature splits, fused by a
softmax attention over the splits computed from their pooled sum. Keys ``conv``, ``bn0``, ``fc1``,
``bn1``, ``fc2`` (the official ResNeSt release's)."""

from __future__ import annotations

from typing import Any, Optional, Union, cast

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules.utils import _pair

from .batch_norm import NormSpec, get_norm
from .drop import DropBlock2d

__all__ = ["DropBlock2D", "SplAtConv2d", "rSoftMax"]

IntPair = Union[int, tuple[int, int]]


class DropBlock2D(DropBlock2d):
    """Upstream's name for DropBlock inside ResNeSt: ``DropBlock2D(drop_prob, block_size)``
    (upstream's class was a placeholder that raised; this one drops blocks)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)


class rSoftMax(nn.Module):  # noqa: N801  (upstream's class name)
    """Softmax over the ``radix`` splits of each of the ``cardinality`` groups (sigmoid for radix 1)."""

    def __init__(self, radix: int, cardinality: int) -> None:
        super().__init__()
        self.radix = radix
        self.cardinality = cardinality

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch = x.size(0)
        if self.radix == 1:
            return torch.sigmoid(x)
        per_split = x.view(batch, self.cardinality, self.radix, -1).transpose(1, 2)
        return F.softmax(per_split, dim=1).reshape(batch, -1)


class SplAtConv2d(nn.Module):
    """Split-attention ``kernel_size`` convolution from ``in_channels`` to ``channels``.

    ``norm_layer``: a norm name or factory (``get_norm``) for ``bn0`` / ``bn1``, None for none;
    ``dropblock_prob`` > 0 adds DropBlock (3x3) after ``bn0``. The rectified convolution of the
    ``rfconv`` package (``rectify=True``) is not available and is refused.
    """

    def __init__(
        self,
        in_channels: int,
        channels: int,
        kernel_size: IntPair,
        stride: IntPair = (1, 1),
        padding: IntPair = (0, 0),
        dilation: IntPair = (1, 1),
        groups: int = 1,
        bias: bool = True,
        radix: int = 2,
        reduction_factor: int = 4,
        rectify: bool = False,
        rectify_avg: bool = False,
        norm_layer: Optional[NormSpec] = None,
        dropblock_prob: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        pad = _pair(padding)
        if rectify and (pad[0] > 0 or pad[1] > 0):
            raise NotImplementedError(
                "SplAtConv2d(rectify=True) needs the rectified convolution of the 'rfconv' package, "
                "which fastreid does not provide; use rectify=False"
            )
        inter_channels = max(in_channels * radix // reduction_factor, 32)
        self.radix = radix
        self.cardinality = groups
        self.channels = channels
        self.dropblock_prob = dropblock_prob
        self.conv = nn.Conv2d(
            in_channels, channels * radix, kernel_size, stride, pad, dilation,
            groups=groups * radix, bias=bias, **kwargs,
        )  # fmt: skip
        self.use_bn = norm_layer is not None
        if norm_layer is not None:
            self.bn0 = get_norm(norm_layer, channels * radix)
        self.relu = nn.ReLU(inplace=True)
        self.fc1 = nn.Conv2d(channels, inter_channels, 1, groups=groups)
        if norm_layer is not None:
            self.bn1 = get_norm(norm_layer, inter_channels)
        self.fc2 = nn.Conv2d(inter_channels, channels * radix, 1, groups=groups)
        if dropblock_prob > 0.0:
            self.dropblock = DropBlock2D(dropblock_prob, 3)
        self.rsoftmax = rSoftMax(radix, groups)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        if self.use_bn:
            x = self.bn0(x)
        if self.dropblock_prob > 0.0:
            x = self.dropblock(x)
        x = self.relu(x)
        batch, rchannel = x.shape[:2]
        splits = torch.split(x, rchannel // self.radix, dim=1) if self.radix > 1 else (x,)
        gap = F.adaptive_avg_pool2d(cast(torch.Tensor, sum(splits)), 1)
        gap = self.fc1(gap)
        if self.use_bn:
            gap = self.bn1(gap)
        attention = self.rsoftmax(self.fc2(self.relu(gap))).view(batch, -1, 1, 1)
        if self.radix == 1:
            return (attention * x).contiguous()
        attentions = torch.split(attention, rchannel // self.radix, dim=1)
        return cast(torch.Tensor, sum(a * s for a, s in zip(attentions, splits))).contiguous()
