"""Split attention (ResNeSt, Zhang et al., 2020): a grouped convolution producing ``radix``
feature splits per cardinal group, fused by attention weights computed from their pooled sum.

Keys: ``conv`` (the grouped k x k conv), ``bn0`` (its norm), ``fc1``/``bn1``/``fc2`` (the attention
MLP, 1x1 grouped convs); the official ResNeSt release's and upstream's, so their checkpoints load.
"""

from __future__ import annotations

from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules.utils import _pair

from .batch_norm import NormSpec, get_norm
from .drop import DropBlock2d

__all__ = ["SplAtConv2d", "rSoftMax", "DropBlock2D"]

_RFCONV_URL = "https://github.com/zhanghang1989/RFConv"


class DropBlock2D(DropBlock2d):
    """DropBlock as ResNeSt's blocks call it, ``DropBlock2D(drop_prob, block_size)``; further
    arguments are :class:`DropBlock2d`'s. (Upstream's class is a placeholder that raises
    ``NotImplementedError``, so ``dropblock_prob > 0`` fails there; here it drops blocks.)"""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)


class rSoftMax(nn.Module):  # noqa: N801  (upstream's class name)
    """Attention weights from the N x (cardinality * radix * C) logits: a softmax over the radix
    splits of each cardinal group (a sigmoid when ``radix`` is 1), flattened back to N x -1."""

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


def _rectified_conv(*args: object, **kwargs: object) -> nn.Module:
    # rfconv is an optional CUDA extension, imported only when a rectified conv is asked for
    try:
        from rfconv import RFConv2d  # type: ignore[import-not-found]  # optional, without type stubs
    except ImportError as e:
        raise ImportError(
            f"A rectified split-attention conv (rectify=True) needs the rfconv package ({_RFCONV_URL}); "
            "install it or build the model with rectify=False"
        ) from e
    return cast(nn.Module, RFConv2d(*args, **kwargs))


class SplAtConv2d(nn.Module):
    """Split-attention conv: ``channels`` output channels, ``radix`` splits per group.

    ``norm_layer`` (a norm name or factory for :func:`~fastreid.layers.get_norm`) adds ``bn0`` and
    ``bn1``; None leaves them out. ``dropblock_prob > 0`` applies :class:`DropBlock2D` after
    ``bn0``. ``rectify`` uses rfconv's rectified convolution where there is padding.
    """

    def __init__(
        self,
        in_channels: int,
        channels: int,
        kernel_size: int | tuple[int, int],
        stride: int | tuple[int, int] = (1, 1),
        padding: int | tuple[int, int] = (0, 0),
        dilation: int | tuple[int, int] = (1, 1),
        groups: int = 1,
        bias: bool = True,
        radix: int = 2,
        reduction_factor: int = 4,
        rectify: bool = False,
        rectify_avg: bool = False,
        norm_layer: NormSpec | None = None,
        dropblock_prob: float = 0.0,
        **kwargs: object,
    ) -> None:
        super().__init__()
        pad = _pair(padding)
        self.rectify = rectify and (pad[0] > 0 or pad[1] > 0)
        self.rectify_avg = rectify_avg
        inter_channels = max(in_channels * radix // reduction_factor, 32)
        self.radix = radix
        self.cardinality = groups
        self.channels = channels
        self.dropblock_prob = dropblock_prob
        conv_args = (in_channels, channels * radix, kernel_size, stride, pad, dilation)
        if self.rectify:
            self.conv = _rectified_conv(
                *conv_args, groups=groups * radix, bias=bias, average_mode=rectify_avg, **kwargs
            )
        else:
            self.conv = nn.Conv2d(*conv_args, groups=groups * radix, bias=bias, **kwargs)  # type: ignore[arg-type]  # sizes as int or pairs
        self.use_bn = norm_layer is not None
        if norm_layer is not None:
            self.bn0 = get_norm(norm_layer, channels * radix)
        self.relu = nn.ReLU(inplace=True)
        self.fc1 = nn.Conv2d(channels, inter_channels, 1, groups=self.cardinality)
        if norm_layer is not None:
            self.bn1 = get_norm(norm_layer, inter_channels)
        self.fc2 = nn.Conv2d(inter_channels, channels * radix, 1, groups=self.cardinality)
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
        pooled = F.adaptive_avg_pool2d(cast(torch.Tensor, sum(splits)), 1)
        pooled = self.fc1(pooled)
        if self.use_bn:
            pooled = self.bn1(pooled)
        weights = self.rsoftmax(self.fc2(self.relu(pooled))).view(batch, -1, 1, 1)
        if self.radix == 1:
            return (weights * x).contiguous()
        per_split = torch.split(weights, rchannel // self.radix, dim=1)
        return cast(torch.Tensor, sum(w * s for w, s in zip(per_split, splits))).contiguous()
