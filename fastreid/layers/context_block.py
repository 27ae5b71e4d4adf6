"""Global context block (GCNet, Cao et al., 2019): pool the map into one context vector (by a
learnt spatial attention, or by averaging), transform it with a bottleneck of ``inplanes * ratio``
channels, and fuse it into every position by addition and/or by a sigmoid gate.

Keys as GCNet's: ``conv_mask`` (attention pooling), ``channel_add_conv.{0,1,3}`` and
``channel_mul_conv.{0,1,3}`` (1x1 conv, LayerNorm, ReLU, 1x1 conv). The last conv of each fusion
starts at zero, so a new block is the identity.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import torch
from torch import nn

__all__ = ["ContextBlock", "last_zero_init"]

_POOLING_TYPES = ("avg", "att")
_FUSION_TYPES = ("channel_add", "channel_mul")


def last_zero_init(m: nn.Module) -> None:
    """Zero the weight and bias of ``m``, or of its last module when ``m`` is a Sequential."""
    target = m[-1] if isinstance(m, nn.Sequential) else m
    nn.init.constant_(cast(torch.Tensor, target.weight), 0)
    bias = getattr(target, "bias", None)
    if bias is not None:
        nn.init.constant_(bias, 0)


def _transform(inplanes: int, planes: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(inplanes, planes, kernel_size=1),
        nn.LayerNorm([planes, 1, 1]),
        nn.ReLU(inplace=True),
        nn.Conv2d(planes, inplanes, kernel_size=1),
    )


class ContextBlock(nn.Module):
    def __init__(
        self,
        inplanes: int,
        ratio: float,
        pooling_type: str = "att",
        fusion_types: Sequence[str] = ("channel_add",),
    ) -> None:
        super().__init__()
        if pooling_type not in _POOLING_TYPES:
            raise ValueError(f"ContextBlock pooling_type {pooling_type!r}; expected one of {_POOLING_TYPES}")
        if not isinstance(fusion_types, (list, tuple)) or not fusion_types:
            raise ValueError("ContextBlock needs at least one fusion type, as a list or tuple")
        unknown = [f for f in fusion_types if f not in _FUSION_TYPES]
        if unknown:
            raise ValueError(f"ContextBlock fusion types {unknown} unknown; expected {_FUSION_TYPES}")
        self.inplanes = inplanes
        self.ratio = ratio
        self.planes = int(inplanes * ratio)
        self.pooling_type = pooling_type
        self.fusion_types = fusion_types
        if pooling_type == "att":
            self.conv_mask = nn.Conv2d(inplanes, 1, kernel_size=1)
            self.softmax = nn.Softmax(dim=2)
        else:
            self.avg_pool = nn.AdaptiveAvgPool2d(1)
        self.channel_add_conv = _transform(inplanes, self.planes) if "channel_add" in fusion_types else None
        self.channel_mul_conv = _transform(inplanes, self.planes) if "channel_mul" in fusion_types else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.pooling_type == "att":
            nn.init.kaiming_normal_(self.conv_mask.weight, a=0, mode="fan_in", nonlinearity="relu")
            if self.conv_mask.bias is not None:
                nn.init.constant_(self.conv_mask.bias, 0)
        for fusion in (self.channel_add_conv, self.channel_mul_conv):
            if fusion is not None:
                last_zero_init(fusion)

    def spatial_pool(self, x: torch.Tensor) -> torch.Tensor:
        """The N x C x 1 x 1 context: attention-weighted (``att``) or plain (``avg``) mean."""
        n, c, h, w = x.shape
        if self.pooling_type != "att":
            return self.avg_pool(x)
        weights = self.softmax(self.conv_mask(x).view(n, 1, h * w))  # N x 1 x HW
        context = torch.matmul(x.view(n, 1, c, h * w), weights.unsqueeze(-1))  # N x 1 x C x 1
        return context.view(n, c, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        context = self.spatial_pool(x)
        out = x
        if self.channel_mul_conv is not None:
            out = out * torch.sigmoid(self.channel_mul_conv(context))
        if self.channel_add_conv is not None:
            out = out + self.channel_add_conv(context)
        return out
