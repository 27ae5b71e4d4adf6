"""MobileNetV2 (Sandler et al., 2018) with upstream FastReID's module layout and keys.

``features.0`` is the stem (conv ``0``, norm ``1``); ``features.1..17`` are inverted residual
blocks whose ``conv`` holds pointwise/depthwise convs and norms at indices 0,1,3,4(,6,7);
``conv`` (``conv.0``/``conv.1``) is the final 1x1 to 1280 channels (more for widths above 1.0).
``DEPTH`` is the width multiplier: 1.0x, 0.75x, 0.5x, 0.35x, 0.25x, 0.1x. The stride is
fixed at 32 (``LAST_STRIDE`` is not used, as upstream). Like upstream, the last norm of each
expanding block is always BatchNorm, whatever ``NORM`` says.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from fastreid.layers import get_norm
from fastreid.layers.batch_norm import NormSpec
from fastreid.layers.helpers import make_divisible

from .build import BACKBONE_REGISTRY, backbone_norm
from .pretrained import load_pretrained_backbone
from .resnet import normalize_depth

__all__ = [
    "MobileNetV2",
    "InvertedResidual",
    "conv_3x3_bn",
    "conv_1x1_bn",
    "build_mobilenetv2_backbone",
    "MOBILENETV2_WIDTHS",
]

MOBILENETV2_WIDTHS = {"1.0x": 1.0, "0.75x": 0.75, "0.5x": 0.5, "0.35x": 0.35, "0.25x": 0.25, "0.1x": 0.1}

# expansion t, channels c, repeats n, first stride s
_STAGES = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)


def _conv_norm_relu6(
    inp: int, oup: int, kernel: int, stride: int, bn_norm: NormSpec, groups: int = 1
) -> list[nn.Module]:
    return [
        nn.Conv2d(inp, oup, kernel, stride, kernel // 2, groups=groups, bias=False),
        get_norm(bn_norm, oup),
        nn.ReLU6(inplace=True),
    ]


def conv_3x3_bn(inp: int, oup: int, stride: int, bn_norm: NormSpec) -> nn.Sequential:
    """3x3 conv (``stride``), norm, ReLU6 (keys ``0``, ``1``): MobileNetV2's stem."""
    return nn.Sequential(*_conv_norm_relu6(inp, oup, 3, stride, bn_norm))


def conv_1x1_bn(inp: int, oup: int, bn_norm: NormSpec) -> nn.Sequential:
    """1x1 conv, norm, ReLU6 (keys ``0``, ``1``): MobileNetV2's last conv."""
    return nn.Sequential(*_conv_norm_relu6(inp, oup, 1, 1, bn_norm))


class InvertedResidual(nn.Module):
    def __init__(self, inp: int, oup: int, bn_norm: NormSpec, stride: int, expand_ratio: int) -> None:
        super().__init__()
        hidden = round(inp * expand_ratio)
        self.identity = stride == 1 and inp == oup
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers += _conv_norm_relu6(inp, hidden, 1, 1, bn_norm)
        layers += _conv_norm_relu6(hidden, hidden, 3, stride, bn_norm, groups=hidden)
        projection_norm = get_norm(bn_norm, oup) if expand_ratio == 1 else nn.BatchNorm2d(oup)
        layers += [nn.Conv2d(hidden, oup, 1, bias=False), projection_norm]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.identity else self.conv(x)


class MobileNetV2(nn.Module):
    def __init__(self, bn_norm: NormSpec = "BN", width_mult: float = 1.0) -> None:
        super().__init__()
        divisor = 4 if width_mult == 0.1 else 8
        channels = make_divisible(32 * width_mult, divisor)
        layers: list[nn.Module] = [conv_3x3_bn(3, channels, 2, bn_norm)]
        for t, c, n, s in _STAGES:
            out = make_divisible(c * width_mult, divisor)
            for i in range(n):
                layers.append(InvertedResidual(channels, out, bn_norm, s if i == 0 else 1, t))
                channels = out
        self.features = nn.Sequential(*layers)
        self.out_channels = make_divisible(1280 * width_mult, divisor) if width_mult > 1.0 else 1280
        self.conv = conv_1x1_bn(channels, self.out_channels, bn_norm)
        self._init_weights()

    def _init_weights(self) -> None:
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                n = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                nn.init.normal_(m.weight, 0, math.sqrt(2.0 / n))
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(self.features(x))


@BACKBONE_REGISTRY.register()
def build_mobilenetv2_backbone(cfg) -> MobileNetV2:
    """MobileNetV2 from ``MODEL.BACKBONE.*`` (DEPTH = width, NORM, PRETRAIN_PATH). Upstream publishes
    no weights for it: ``PRETRAIN`` needs ``PRETRAIN_PATH`` (e.g. tonylins/pytorch-mobilenet-v2's)."""
    bb = cfg.MODEL.BACKBONE
    width = normalize_depth(bb.DEPTH, list(MOBILENETV2_WIDTHS))
    model = MobileNetV2(backbone_norm(cfg), MOBILENETV2_WIDTHS[width])
    if bb.PRETRAIN:
        load_pretrained_backbone(
            model, bb.PRETRAIN_PATH, None, f"MobileNetV2 {width}", drop_prefixes=("classifier.",)
        )
    return model
