"""MobileNetV3 Large/Small (Howard et al., 2019) with upstream FastReID's classes and keys: the
network of torchvision's ``mobilenet_v3_*`` (``features``, the same keys, so torchvision's ImageNet
weights load) built with ``MODEL.BACKBONE.NORM``, followed by ``conv``, a 1x1 conv + norm + ReLU6
to 1280 (Large) or 1024 (Small) channels, as upstream adds it."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Callable

import torch
import torch.nn.functional as F
import torchvision.models as tvm
from torch import nn

from fastreid.config import ConfigError
from fastreid.layers import get_norm
from fastreid.layers.batch_norm import NormSpec
from fastreid.layers.helpers import make_divisible

from .build import BACKBONE_REGISTRY
from .pretrained import load_pretrained_backbone

__all__ = [
    "MobileNetV3",
    "InvertedResidual",
    "InvertedResidualConfig",
    "SqueezeExcitation",
    "ConvBNActivation",
    "conv_1x1_bn",
    "mobilenet_v3_config",
    "build_mobilenetv3_backbone",
    "MOBILENETV3_WEIGHTS",
]

# DEPTH -> torchvision's ImageNet weights of the same network
MOBILENETV3_WEIGHTS = {"Large": "MobileNet_V3_Large_Weights", "Small": "MobileNet_V3_Small_Weights"}


def conv_1x1_bn(inp: int, oup: int, bn_norm: NormSpec) -> nn.Sequential:
    """1x1 conv, norm, ReLU6 (keys ``0``, ``1``)."""
    return nn.Sequential(
        nn.Conv2d(inp, oup, 1, 1, 0, bias=False), get_norm(bn_norm, oup), nn.ReLU6(inplace=True)
    )


class ConvBNActivation(nn.Sequential):
    """Conv (``same`` padding), norm, activation (ReLU6 by default): keys ``0``, ``1``."""

    def __init__(
        self,
        in_planes: int,
        out_planes: int,
        kernel_size: int = 3,
        stride: int = 1,
        groups: int = 1,
        bn_norm: NormSpec | None = None,
        activation_layer: Callable[..., nn.Module] | None = None,
        dilation: int = 1,
    ) -> None:
        if bn_norm is None:
            raise ValueError("ConvBNActivation needs bn_norm: a norm name or factory")
        padding = (kernel_size - 1) // 2 * dilation
        super().__init__(
            nn.Conv2d(
                in_planes,
                out_planes,
                kernel_size,
                stride,
                padding,
                dilation=dilation,
                groups=groups,
                bias=False,
            ),
            get_norm(bn_norm, out_planes),
            (activation_layer or nn.ReLU6)(inplace=True),
        )
        self.out_channels = out_planes


class SqueezeExcitation(nn.Module):
    """Channel gate: pooled input -> 1x1 conv to ``input_channels / squeeze_factor`` (rounded to a
    multiple of 8), ReLU, 1x1 conv back, hard sigmoid (keys ``fc1``, ``fc2``)."""

    def __init__(self, input_channels: int, squeeze_factor: int = 4) -> None:
        super().__init__()
        squeeze_channels = make_divisible(input_channels // squeeze_factor, 8)
        self.fc1 = nn.Conv2d(input_channels, squeeze_channels, 1)
        self.relu = nn.ReLU(inplace=True)
        self.fc2 = nn.Conv2d(squeeze_channels, input_channels, 1)

    def _scale(self, input: torch.Tensor, inplace: bool) -> torch.Tensor:
        scale = self.fc2(self.relu(self.fc1(F.adaptive_avg_pool2d(input, 1))))
        return F.hardsigmoid(scale, inplace=inplace)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return self._scale(input, True) * input


class InvertedResidualConfig:
    """One block's design; channel counts scaled by ``width_mult`` and rounded to multiples of 8.
    ``activation`` is "RE" (ReLU) or "HS" (hard swish)."""

    def __init__(
        self,
        input_channels: int,
        kernel: int,
        expanded_channels: int,
        out_channels: int,
        use_se: bool,
        activation: str,
        stride: int,
        dilation: int,
        width_mult: float,
    ) -> None:
        self.input_channels = self.adjust_channels(input_channels, width_mult)
        self.kernel = kernel
        self.expanded_channels = self.adjust_channels(expanded_channels, width_mult)
        self.out_channels = self.adjust_channels(out_channels, width_mult)
        self.use_se = use_se
        self.use_hs = activation == "HS"
        self.stride = stride
        self.dilation = dilation

    @staticmethod
    def adjust_channels(channels: float, width_mult: float) -> int:
        return make_divisible(channels * width_mult, 8)


class InvertedResidual(nn.Module):
    """(1x1 expand), depthwise k x k, (SE), 1x1 project, in ``block``; residual when shapes allow."""

    def __init__(
        self,
        cnf: InvertedResidualConfig,
        bn_norm: NormSpec,
        se_layer: Callable[[int], nn.Module] = SqueezeExcitation,
    ) -> None:
        super().__init__()
        if not 1 <= cnf.stride <= 2:
            raise ValueError(f"illegal stride value {cnf.stride}")
        self.use_res_connect = cnf.stride == 1 and cnf.input_channels == cnf.out_channels
        activation = nn.Hardswish if cnf.use_hs else nn.ReLU
        layers: list[nn.Module] = []
        if cnf.expanded_channels != cnf.input_channels:
            layers.append(
                ConvBNActivation(
                    cnf.input_channels, cnf.expanded_channels, 1, bn_norm=bn_norm, activation_layer=activation
                )
            )
        layers.append(
            ConvBNActivation(
                cnf.expanded_channels,
                cnf.expanded_channels,
                cnf.kernel,
                stride=1 if cnf.dilation > 1 else cnf.stride,
                groups=cnf.expanded_channels,
                bn_norm=bn_norm,
                activation_layer=activation,
                dilation=cnf.dilation,
            )
        )
        if cnf.use_se:
            layers.append(se_layer(cnf.expanded_channels))
        layers.append(
            ConvBNActivation(
                cnf.expanded_channels, cnf.out_channels, 1, bn_norm=bn_norm, activation_layer=nn.Identity
            )
        )
        self.block = nn.Sequential(*layers)
        self.out_channels = cnf.out_channels
        self._is_cn = cnf.stride > 1

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        result = self.block(input)
        return result + input if self.use_res_connect else result


class MobileNetV3(nn.Module):
    """``features``: a 3x3 stem, the ``inverted_residual_setting`` blocks (``block``, by default
    :class:`InvertedResidual`) and a 1x1 conv to 6x the last block's width; then ``conv``
    (:func:`conv_1x1_bn`) to ``last_channel``."""

    def __init__(
        self,
        bn_norm: NormSpec,
        inverted_residual_setting: Sequence[InvertedResidualConfig],
        last_channel: int,
        block: Callable[..., nn.Module] | None = None,
    ) -> None:
        super().__init__()
        if not inverted_residual_setting:
            raise ValueError("The inverted_residual_setting should not be empty")
        if not all(isinstance(s, InvertedResidualConfig) for s in inverted_residual_setting):
            raise TypeError("The inverted_residual_setting should be List[InvertedResidualConfig]")
        block = block or InvertedResidual
        first = inverted_residual_setting[0].input_channels
        last = inverted_residual_setting[-1].out_channels
        layers: list[nn.Module] = [
            ConvBNActivation(3, first, 3, stride=2, bn_norm=bn_norm, activation_layer=nn.Hardswish)
        ]
        layers += [block(cnf, bn_norm) for cnf in inverted_residual_setting]
        layers.append(ConvBNActivation(last, 6 * last, 1, bn_norm=bn_norm, activation_layer=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.conv = conv_1x1_bn(6 * last, last_channel, bn_norm)
        self.out_channels = last_channel
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(self.features(x))


# (input channels, kernel, expanded channels, output channels, SE, activation, stride) per block;
# the blocks marked "tail" are the last stage, reduced by ``reduced_tail`` and dilated by ``dilated``
_LARGE = [
    (16, 3, 16, 16, False, "RE", 1),
    (16, 3, 64, 24, False, "RE", 2),
    (24, 3, 72, 24, False, "RE", 1),
    (24, 5, 72, 40, True, "RE", 2),
    (40, 5, 120, 40, True, "RE", 1),
    (40, 5, 120, 40, True, "RE", 1),
    (40, 3, 240, 80, False, "HS", 2),
    (80, 3, 200, 80, False, "HS", 1),
    (80, 3, 184, 80, False, "HS", 1),
    (80, 3, 184, 80, False, "HS", 1),
    (80, 3, 480, 112, True, "HS", 1),
    (112, 3, 672, 112, True, "HS", 1),
]
_LARGE_TAIL = [
    (112, 5, 672, 160, True, "HS", 2),
    (160, 5, 960, 160, True, "HS", 1),
    (160, 5, 960, 160, True, "HS", 1),
]
_SMALL = [
    (16, 3, 16, 16, True, "RE", 2),
    (16, 3, 72, 24, False, "RE", 2),
    (24, 3, 88, 24, False, "RE", 1),
    (24, 5, 96, 40, True, "HS", 2),
    (40, 5, 240, 40, True, "HS", 1),
    (40, 5, 240, 40, True, "HS", 1),
    (40, 5, 120, 48, True, "HS", 1),
    (48, 5, 144, 48, True, "HS", 1),
]
_SMALL_TAIL = [
    (48, 5, 288, 96, True, "HS", 2),
    (96, 5, 576, 96, True, "HS", 1),
    (96, 5, 576, 96, True, "HS", 1),
]
_ARCHS = {"Large": (_LARGE, _LARGE_TAIL, 1280), "Small": (_SMALL, _SMALL_TAIL, 1024)}


def mobilenet_v3_config(
    arch: str, width_mult: float = 1.0, reduced_tail: bool = False, dilated: bool = False
) -> tuple[list[InvertedResidualConfig], int]:
    """(block settings, last channel) of MobileNetV3 ``arch`` ("Large" or "Small")."""
    if arch not in _ARCHS:
        raise ValueError(f"Unsupported model type {arch}; expected Large or Small")
    head, tail, last = _ARCHS[arch]
    divider = 2 if reduced_tail else 1
    dilation = 2 if dilated else 1
    config = functools.partial(InvertedResidualConfig, width_mult=width_mult)
    settings = [config(*block, 1) for block in head]
    for i, (cin, kernel, expanded, cout, se, act, stride) in enumerate(tail):
        if i > 0:  # the first tail block takes the unreduced width
            cin, expanded = cin // divider, expanded // divider
        settings.append(config(cin, kernel, expanded, cout // divider, se, act, stride, dilation))
    return settings, InvertedResidualConfig.adjust_channels(last // divider, width_mult)


@BACKBONE_REGISTRY.register()
def build_mobilenetv3_backbone(cfg) -> MobileNetV3:
    """MobileNetV3 from ``MODEL.BACKBONE.*`` (DEPTH Large or Small, NORM, PRETRAIN[_PATH])."""
    bb = cfg.MODEL.BACKBONE
    variant = str(bb.DEPTH).capitalize()
    if variant not in MOBILENETV3_WEIGHTS:
        raise ConfigError(
            f"MODEL.BACKBONE.DEPTH {bb.DEPTH!r} is not a MobileNetV3 variant; expected Large or Small"
        )
    settings, last_channel = mobilenet_v3_config(variant)
    model = MobileNetV3(bb.NORM, settings, last_channel)
    if bb.PRETRAIN:
        weights = getattr(tvm, MOBILENETV3_WEIGHTS[variant]).IMAGENET1K_V1
        load_pretrained_backbone(
            model, bb.PRETRAIN_PATH, weights, f"MobileNetV3-{variant}", drop_prefixes=("classifier.",)
        )
    return model
