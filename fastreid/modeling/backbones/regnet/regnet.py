"""RegNetX / RegNetY (Radosavovic et al., 2020) as upstream FastReID builds them (pycls's AnyNet).

Keys: ``stem.{conv,bn}``, ``sS.bB.{proj,bn}`` (projection shortcut), ``sS.bB.f.{a,a_bn,b,b_bn,c,c_bn}``
and, for RegNetY, ``sS.bB.f.se.f_ex.{0,2}``. torchvision's RegNet is the same network under other
key names, so it is not reused.

``DEPTH`` names a variant the way upstream does: ``<MF>x`` / ``<MF>y`` for 200, 400, 800, 1600,
3200, 4000 and 6400 MFLOPs. Each variant's design parameters (depth, w0, wa, wm, group width)
are the numbers of pycls's ``RegNet{X,Y}-*_dds_8gpu.yaml`` files that upstream ships; the per-stage
widths and depths are derived from them with RegNet's quantised linear rule. Unlike upstream (which
merges each YAML into one global config, so a RegNetX built after a RegNetY keeps its SE blocks),
every build starts from its own variant's numbers. The last stage's stride is ``LAST_STRIDE``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from fastreid.layers import get_norm
from fastreid.layers.batch_norm import NormSpec

from ..build import BACKBONE_REGISTRY, backbone_norm
from ..pretrained import load_pretrained_backbone
from ..pretrained_urls import pretrained_weights_for
from ..resnet import normalize_depth

__all__ = ["RegNet", "RegNetSpec", "REGNET_SPECS", "regnet_stages", "build_regnet_backbone"]


@dataclass(frozen=True)
class RegNetSpec:
    depth: int
    w0: int
    wa: float
    wm: float
    group_w: int
    se: bool
    stem_w: int = 32
    bot_mul: float = 1.0
    se_ratio: float = 0.25
    stride: int = 2


REGNET_SPECS: dict[str, RegNetSpec] = {
    "200x": RegNetSpec(13, 24, 36.44, 2.49, 8, False),
    "200y": RegNetSpec(13, 24, 36.44, 2.49, 8, True),
    "400x": RegNetSpec(22, 24, 24.48, 2.54, 16, False),
    "400y": RegNetSpec(16, 48, 27.89, 2.09, 8, True),
    "800x": RegNetSpec(16, 56, 35.73, 2.28, 16, False),
    "800y": RegNetSpec(14, 56, 38.84, 2.4, 16, True),
    "1600x": RegNetSpec(18, 80, 34.01, 2.25, 24, False),
    "1600y": RegNetSpec(27, 48, 20.71, 2.65, 24, True),
    "3200x": RegNetSpec(25, 88, 26.31, 2.25, 48, False),
    "3200y": RegNetSpec(21, 80, 42.63, 2.66, 24, True),
    "4000x": RegNetSpec(23, 96, 38.65, 2.43, 40, False),
    "4000y": RegNetSpec(22, 96, 31.41, 2.24, 64, True),
    "6400x": RegNetSpec(17, 184, 60.83, 2.07, 56, False),
    "6400y": RegNetSpec(25, 112, 33.22, 2.27, 72, True),
}


def regnet_stages(spec: RegNetSpec, quantum: int = 8) -> list[tuple[int, int, int]]:
    """Per stage ``(width, blocks, group width)``: block widths ``w0 + wa * i`` snapped to
    ``w0 * wm^k`` and to multiples of ``quantum``, consecutive equal widths merged into a stage,
    then widths made divisible by their (capped) group width."""
    continuous = np.arange(spec.depth) * spec.wa + spec.w0
    exponents = np.round(np.log(continuous / spec.w0) / np.log(spec.wm))
    widths = (
        (np.round(np.divide(spec.w0 * np.power(spec.wm, exponents), quantum)) * quantum).astype(int).tolist()
    )
    stages: list[list[int]] = []
    for w in widths:
        if stages and stages[-1][0] == w:
            stages[-1][1] += 1
        else:
            stages.append([w, 1])
    result = []
    for w, d in stages:
        bottleneck = int(w * spec.bot_mul)
        group = min(spec.group_w, bottleneck)
        bottleneck = int(round(bottleneck / group) * group)
        result.append((int(bottleneck / spec.bot_mul), d, group))
    return result


class SqueezeExcite(nn.Module):
    """Keys ``f_ex.0`` (reduce) and ``f_ex.2`` (expand), 1x1 convs with bias."""

    def __init__(self, channels: int, reduced: int, activation: type[nn.Module] = nn.ReLU) -> None:
        super().__init__()
        self.avg_pool = nn.AdaptiveAvgPool2d(1)
        self.f_ex = nn.Sequential(
            nn.Conv2d(channels, reduced, 1), activation(), nn.Conv2d(reduced, channels, 1), nn.Sigmoid()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.f_ex(self.avg_pool(x))


@dataclass(frozen=True)
class BottleneckShape:
    """A stage's bottleneck: width multiplier, group width, SE ratio (None: no SE)."""

    bot_mul: float
    group_w: int
    se_ratio: float | None


class BottleneckTransform(nn.Module):
    """1x1, grouped 3x3 (stride), optional SE, 1x1: keys ``a``, ``b``, ``se``, ``c`` with norms."""

    def __init__(self, w_in: int, w_out: int, stride: int, bn_norm: NormSpec, shape: BottleneckShape) -> None:
        super().__init__()
        bot_mul, group_w, se_ratio = shape.bot_mul, shape.group_w, shape.se_ratio
        w_b = int(round(w_out * bot_mul))
        self.a = nn.Conv2d(w_in, w_b, 1, bias=False)
        self.a_bn = get_norm(bn_norm, w_b)
        self.a_relu = nn.ReLU(inplace=True)
        self.b = nn.Conv2d(w_b, w_b, 3, stride, 1, groups=w_b // group_w, bias=False)
        self.b_bn = get_norm(bn_norm, w_b)
        self.b_relu = nn.ReLU(inplace=True)
        self.se = SqueezeExcite(w_b, int(round(w_in * se_ratio))) if se_ratio else None
        self.c = nn.Conv2d(w_b, w_out, 1, bias=False)
        self.c_bn = get_norm(bn_norm, w_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.b_relu(self.b_bn(self.b(self.a_relu(self.a_bn(self.a(x))))))
        if self.se is not None:
            x = self.se(x)
        return self.c_bn(self.c(x))


class ResBottleneckBlock(nn.Module):
    """The bottleneck transform plus a shortcut (a strided 1x1 projection when the shape changes)."""

    def __init__(self, w_in: int, w_out: int, stride: int, bn_norm: NormSpec, shape: BottleneckShape) -> None:
        super().__init__()
        self.proj_block = w_in != w_out or stride != 1
        if self.proj_block:
            self.proj = nn.Conv2d(w_in, w_out, 1, stride, bias=False)
            self.bn = get_norm(bn_norm, w_out)
        self.f = BottleneckTransform(w_in, w_out, stride, bn_norm, shape)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = self.bn(self.proj(x)) if self.proj_block else x
        return self.relu(shortcut + self.f(x))


class SimpleStem(nn.Module):
    """3x3 stride-2 conv, norm, ReLU: keys ``conv``, ``bn``."""

    def __init__(self, w_in: int, w_out: int, bn_norm: NormSpec) -> None:
        super().__init__()
        self.conv = nn.Conv2d(w_in, w_out, 3, stride=2, padding=1, bias=False)
        self.bn = get_norm(bn_norm, w_out)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.bn(self.conv(x)))


def init_weights(module: nn.Module) -> None:
    """pycls's ResNet-style initialisation: conv ~ N(0, 2 / fan_out), norms weight 1 bias 0."""
    if isinstance(module, nn.Conv2d):
        fan_out = module.kernel_size[0] * module.kernel_size[1] * module.out_channels
        nn.init.normal_(module.weight, 0, math.sqrt(2.0 / fan_out))
    elif isinstance(module, nn.BatchNorm2d):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


class RegNet(nn.Sequential):
    """Stem, then stages ``s1``..``s4``, applied in order."""

    def __init__(self, spec: RegNetSpec, last_stride: int, bn_norm: NormSpec) -> None:
        super().__init__()
        self.stem = SimpleStem(3, spec.stem_w, bn_norm)
        stages = regnet_stages(spec)
        w_in = spec.stem_w
        for i, (w_out, blocks, group_w) in enumerate(stages):
            stride = last_stride if i == len(stages) - 1 else spec.stride
            shape = BottleneckShape(spec.bot_mul, group_w, spec.se_ratio if spec.se else None)
            stage = nn.Sequential()
            for b in range(blocks):
                stage.add_module(
                    f"b{b + 1}",
                    ResBottleneckBlock(
                        w_in if b == 0 else w_out,
                        w_out,
                        stride if b == 0 else 1,
                        bn_norm,
                        shape,
                    ),
                )
            self.add_module(f"s{i + 1}", stage)
            w_in = w_out
        self.out_channels = w_in
        self.apply(init_weights)


@BACKBONE_REGISTRY.register()
def build_regnet_backbone(cfg) -> RegNet:
    """RegNet from ``MODEL.BACKBONE.*`` (DEPTH e.g. "800y", LAST_STRIDE, NORM, PRETRAIN[_PATH])."""
    bb = cfg.MODEL.BACKBONE
    depth = normalize_depth(bb.DEPTH, list(REGNET_SPECS))
    model = RegNet(REGNET_SPECS[depth], bb.LAST_STRIDE, backbone_norm(cfg))
    if bb.PRETRAIN:
        name = f"RegNet{depth[-1].upper()}-{depth[:-1]}MF"
        load_pretrained_backbone(
            model,
            bb.PRETRAIN_PATH,
            None,
            name,
            drop_prefixes=("head.",),
            source=pretrained_weights_for("regnet", depth),
        )
    return model
