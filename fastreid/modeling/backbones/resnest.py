"""ResNeSt-50/101/200/269 (Zhang et al., 2020): ResNet-D with split-attention 3x3 convolutions.

The variant upstream FastReID builds for its ``*_S50`` configs: radix 2, one cardinal group,
a deep 3-conv stem (``conv1.{0,3,6}``), average-pool downsampling (``downsample.{1,2}``) and
average-pool stride on the 3x3 ("avd") in the first block of layers 2-4. State-dict keys and
shapes are upstream's (and the official ResNeSt release's), so their checkpoints load strictly.

``LAST_STRIDE 1`` keeps layer4 at stride 1 and dilates its later blocks by 2, as upstream does.
``WITH_IBN``/``WITH_SE``/``WITH_NL`` have no ResNeSt variant upstream; they are ignored with a
warning (the AGW ``S50`` configs set ``WITH_NL`` and upstream ignores it silently).
"""

from __future__ import annotations

import logging
import math
from typing import Callable

import torch
from torch import nn

from fastreid.layers.splat import SplAtConv2d

from .build import BACKBONE_REGISTRY, backbone_norm
from .pretrained import load_pretrained_backbone
from .pretrained_urls import pretrained_weights_for
from .resnet import normalize_depth

__all__ = ["ResNeSt", "ResNeStBottleneck", "build_resnest_backbone", "RESNEST_DEPTHS"]

logger = logging.getLogger(__name__)

NormFactory = Callable[[int], nn.Module]

# depth -> (blocks per stage, stem width)
RESNEST_DEPTHS: dict[str, tuple[list[int], int]] = {
    "50x": ([3, 4, 6, 3], 32),
    "101x": ([3, 4, 23, 3], 64),
    "200x": ([3, 24, 36, 3], 64),
    "269x": ([3, 30, 48, 8], 64),
}


class ResNeStBottleneck(nn.Module):
    """1x1 -> split-attention 3x3 (-> 3x3 average pool when it carries the stride) -> 1x1, residual."""

    expansion = 4

    def __init__(
        self,
        inplanes: int,
        planes: int,
        norm: NormFactory,
        stride: int = 1,
        downsample: nn.Module | None = None,
        dilation: int = 1,
        avd: bool = False,
        radix: int = 2,
    ) -> None:
        super().__init__()
        width = planes  # bottleneck width 64, one cardinal group
        self.conv1 = nn.Conv2d(inplanes, width, 1, bias=False)
        self.bn1 = norm(width)
        self.avd_layer = nn.AvgPool2d(3, stride, padding=1) if avd else None
        self.conv2 = SplAtConv2d(
            width, width, 3, stride=1 if avd else stride, padding=dilation, dilation=dilation,
            bias=False, radix=radix, norm_layer=norm,
        )  # fmt: skip
        self.conv3 = nn.Conv2d(width, planes * self.expansion, 1, bias=False)
        self.bn3 = norm(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.conv2(self.relu(self.bn1(self.conv1(x))))
        if self.avd_layer is not None:
            out = self.avd_layer(out)
        out = self.bn3(self.conv3(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(out + identity)


class ResNeSt(nn.Module):
    def __init__(
        self, last_stride: int, layers: list[int], stem_width: int, norm: NormFactory, radix: int = 2
    ) -> None:
        super().__init__()
        self.radix = radix
        self.inplanes = stem_width * 2
        self.conv1 = nn.Sequential(
            nn.Conv2d(3, stem_width, 3, stride=2, padding=1, bias=False),
            norm(stem_width),
            nn.ReLU(inplace=True),
            nn.Conv2d(stem_width, stem_width, 3, padding=1, bias=False),
            norm(stem_width),
            nn.ReLU(inplace=True),
            nn.Conv2d(stem_width, stem_width * 2, 3, padding=1, bias=False),
        )
        self.bn1 = norm(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = self._make_layer(64, layers[0], 1, norm, avd_first_block=False)
        self.layer2 = self._make_layer(128, layers[1], 2, norm)
        self.layer3 = self._make_layer(256, layers[2], 2, norm)
        # Upstream: LAST_STRIDE 1 means "dilation 2" for layer4's later blocks.
        dilated = last_stride == 1
        self.layer4 = self._make_layer(
            512, layers[3], 1 if dilated else last_stride, norm, dilation=2 if dilated else 1
        )
        self.out_channels = 512 * ResNeStBottleneck.expansion
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                n = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                nn.init.normal_(m.weight, 0, math.sqrt(2.0 / n))

    def _make_layer(
        self,
        planes: int,
        blocks: int,
        stride: int,
        norm: NormFactory,
        dilation: int = 1,
        avd_first_block: bool = True,
    ) -> nn.Sequential:
        out = planes * ResNeStBottleneck.expansion
        downsample = None
        if stride != 1 or self.inplanes != out:
            pool = stride if dilation == 1 else 1
            downsample = nn.Sequential(
                nn.AvgPool2d(pool, stride=pool, ceil_mode=True, count_include_pad=False),
                nn.Conv2d(self.inplanes, out, 1, bias=False),
                norm(out),
            )
        first = ResNeStBottleneck(
            self.inplanes,
            planes,
            norm,
            stride,
            downsample,
            dilation=1,
            avd=avd_first_block or stride > 1,
            radix=self.radix,
        )
        self.inplanes = out
        rest = [
            ResNeStBottleneck(out, planes, norm, dilation=dilation, radix=self.radix)
            for _ in range(1, blocks)
        ]
        return nn.Sequential(first, *rest)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        return self.layer4(self.layer3(self.layer2(self.layer1(x))))


@BACKBONE_REGISTRY.register()
def build_resnest_backbone(cfg) -> ResNeSt:
    """ResNeSt from ``MODEL.BACKBONE.*`` (DEPTH 50x/101x/200x/269x, LAST_STRIDE, NORM, PRETRAIN[_PATH])."""
    bb = cfg.MODEL.BACKBONE
    depth = normalize_depth(bb.DEPTH, list(RESNEST_DEPTHS))
    ignored = [key for key in ("WITH_IBN", "WITH_SE", "WITH_NL") if getattr(bb, key)]
    if ignored:
        logger.warning(
            f"build_resnest_backbone has no {'/'.join(ignored)} variant; ignoring "
            f"MODEL.BACKBONE.{', '.join(ignored)} (upstream FastReID ignores it too)"
        )
    layers, stem_width = RESNEST_DEPTHS[depth]
    norm = backbone_norm(cfg)
    model = ResNeSt(bb.LAST_STRIDE, layers, stem_width, norm)
    if bb.PRETRAIN:
        load_pretrained_backbone(
            model,
            bb.PRETRAIN_PATH,
            None,
            f"ResNeSt-{depth[:-1]}",
            source=pretrained_weights_for("resnest", depth),
        )
    return model
