"""Global context block of GCNet (Cao et al., 2019), upstream FastReID's
``fastreid.layers.context_block``: a context vector pooled over all positions (by attention or
averaging) transformed and added to (``channel_add``) and/or multiplied into (``channel_mul``)
every position."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional, cast

import torch
from torch import nn

__all__ = ["ContextBlock", "last_zero_init"]


def last_zero_init(m: nn.Module) -> None:
    """Zero the last layer of ``m`` (or ``m``): the block starts as the identity."""
    last = m[-1] if isinstance(m, nn.Sequential) else m
    nn.init.constant_(cast(torch.Tensor, last.weight), 0)
    bias = getattr(last, "bias", None)
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
        if pooling_type not in ("avg", "att"):
            raise ValueError(f"ContextBlock: pooling_type must be 'avg' or 'att', got {pooling_type!r}")
        unknown = [f for f in fusion_types if f not in ("channel_add", "channel_mul")]
        if not fusion_types or unknown:
            raise ValueError(
                f"ContextBlock: fusion_types must be a non-empty subset of channel_add, channel_mul; got {fusion_types}"
            )
        self.inplanes = inplanes
        self.ratio = ratio
        self.planes = int(inplanes * ratio)
        self.pooling_type = pooling_type
        self.fusion_types = tuple(fusion_types)
        if pooling_type == "att":
            self.conv_mask = nn.Conv2d(inplanes, 1, kernel_size=1)
            self.softmax = nn.Softmax(dim=2)
        else:
            self.avg_pool = nn.AdaptiveAvgPool2d(1)
        self.channel_add_conv: Optional[nn.Sequential] = (
            _transform(inplanes, self.planes) if "channel_add" in fusion_types else None
        )
        self.channel_mul_conv: Optional[nn.Sequential] = (
            _transform(inplanes, self.planes) if "channel_mul" in fusion_types else None
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.pooling_type == "att":
            nn.init.kaiming_normal_(self.conv_mask.weight, a=0, mode="fan_in", nonlinearity="relu")
            nn.init.constant_(cast(torch.Tensor, self.conv_mask.bias), 0)
        for transform in (self.channel_add_conv, self.channel_mul_conv):
            if transform is not None:
                last_zero_init(transform)

    def spatial_pool(self, x: torch.Tensor) -> torch.Tensor:
        """The N x C x 1 x 1 context: an attention-weighted or plain average over positions."""
        if self.pooling_type != "att":
            return self.avg_pool(x)
        batch, channels, height, width = x.shape
        weights = self.softmax(self.conv_mask(x).view(batch, 1, height * width))  # N x 1 x HW
        context = torch.matmul(x.view(batch, channels, height * width), weights.transpose(1, 2))
        return context.view(batch, channels, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        context = self.spatial_pool(x)
        out = x
        if self.channel_mul_conv is not None:
            out = out * torch.sigmoid(self.channel_mul_conv(context))
        if self.channel_add_conv is not None:
            out = out + self.channel_add_conv(context)
        return out
