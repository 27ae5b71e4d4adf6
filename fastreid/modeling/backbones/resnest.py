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
from typing import Any, cast

import torch
from torch import nn

from fastreid.layers.batch_norm import NormSpec, get_norm
from fastreid.layers.splat import DropBlock2D, SplAtConv2d

from .build import BACKBONE_REGISTRY, backbone_norm
from .pretrained import load_pretrained_backbone
from .pretrained_urls import pretrained_weights_for
from .resnet import normalize_depth

__all__ = ["ResNeSt", "Bottleneck", "build_resnest_backbone", "short_hash", "RESNEST_DEPTHS"]

logger = logging.getLogger(__name__)

# depth -> (blocks per stage, stem width)
RESNEST_DEPTHS: dict[str, tuple[list[int], int]] = {
    "50x": ([3, 4, 6, 3], 32),
    "101x": ([3, 4, 23, 3], 64),
    "200x": ([3, 24, 36, 3], 64),
    "269x": ([3, 30, 48, 8], 64),
}


def short_hash(name: str) -> str:
    """The 8 hex digits in the file name of ResNeSt's published weights for ``name``
    ("resnest50", ...): the start of the file's SHA-256, checked when it is downloaded."""
    source = pretrained_weights_for("resnest", name.removeprefix("resnest") + "x")
    if not name.startswith("resnest") or source is None or source.hash_prefix is None:
        raise ValueError(f"Pretrained model for {name} is not available.")
    return source.hash_prefix[:8]


def _plain_conv(*args: Any, **kwargs: Any) -> nn.Module:
    return nn.Conv2d(*args, **kwargs)


def _rectified_conv(*args: Any, **kwargs: Any) -> nn.Module:
    # rfconv is an optional CUDA extension, imported only when a rectified conv is asked for
    try:
        from rfconv import RFConv2d  # type: ignore[import-not-found]  # optional, without type stubs
    except ImportError as e:
        raise ImportError(
            "ResNeSt with rectified_conv=True needs the rfconv package "
            "(https://github.com/zhanghang1989/RFConv); install it or use rectified_conv=False"
        ) from e
    return cast(nn.Module, RFConv2d(*args, **kwargs))


class Bottleneck(nn.Module):
    """1x1 -> split-attention 3x3 (or a plain 3x3 when ``radix`` is 0) -> 1x1, residual.

    With ``avd`` the block's stride is carried by a 3x3 average pool (before the 3x3 conv with
    ``avd_first``, after it otherwise) in strided blocks and in the first block of a stage
    (``is_first``). ``dropblock_prob > 0`` drops blocks after each norm; ``last_gamma`` starts the
    last norm's weight at 0.
    """

    expansion = 4

    def __init__(
        self,
        inplanes: int,
        planes: int,
        stride: int = 1,
        downsample: nn.Module | None = None,
        radix: int = 1,
        cardinality: int = 1,
        bottleneck_width: int = 64,
        avd: bool = False,
        avd_first: bool = False,
        dilation: int = 1,
        is_first: bool = False,
        rectified_conv: bool = False,
        rectify_avg: bool = False,
        norm_layer: NormSpec | None = None,
        dropblock_prob: float = 0.0,
        last_gamma: bool = False,
    ) -> None:
        super().__init__()
        if norm_layer is None:
            raise ValueError("ResNeSt's Bottleneck needs norm_layer: a norm name or factory")
        group_width = int(planes * (bottleneck_width / 64.0)) * cardinality
        self.conv1 = nn.Conv2d(inplanes, group_width, kernel_size=1, bias=False)
        self.bn1 = get_norm(norm_layer, group_width)
        self.dropblock_prob = dropblock_prob
        self.radix = radix
        self.avd = avd and (stride > 1 or is_first)
        self.avd_first = avd_first
        if self.avd:
            self.avd_layer = nn.AvgPool2d(3, stride, padding=1)
            stride = 1
        if dropblock_prob > 0.0:
            self.dropblock1 = DropBlock2D(dropblock_prob, 3)
            if radix == 1:
                self.dropblock2 = DropBlock2D(dropblock_prob, 3)
            self.dropblock3 = DropBlock2D(dropblock_prob, 3)
        if radix >= 1:
            self.conv2: nn.Module = SplAtConv2d(
                group_width,
                group_width,
                kernel_size=3,
                stride=stride,
                padding=dilation,
                dilation=dilation,
                groups=cardinality,
                bias=False,
                radix=radix,
                rectify=rectified_conv,
                rectify_avg=rectify_avg,
                norm_layer=norm_layer,
                dropblock_prob=dropblock_prob,
            )
        else:
            conv, extra = (
                (_rectified_conv, {"average_mode": rectify_avg}) if rectified_conv else (_plain_conv, {})
            )
            self.conv2 = conv(
                group_width,
                group_width,
                kernel_size=3,
                stride=stride,
                padding=dilation,
                dilation=dilation,
                groups=cardinality,
                bias=False,
                **extra,
            )
            self.bn2 = get_norm(norm_layer, group_width)
        self.conv3 = nn.Conv2d(group_width, planes * 4, kernel_size=1, bias=False)
        self.bn3 = get_norm(norm_layer, planes * 4)
        if last_gamma:
            nn.init.zeros_(cast(torch.Tensor, self.bn3.weight))
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.dilation = dilation
        self.stride = stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn1(self.conv1(x))
        if self.dropblock_prob > 0.0:
            out = self.dropblock1(out)
        out = self.relu(out)
        if self.avd and self.avd_first:
            out = self.avd_layer(out)
        out = self.conv2(out)
        if self.radix == 0:
            out = self.bn2(out)
            if self.dropblock_prob > 0.0:
                out = self.dropblock2(out)
            out = self.relu(out)
        if self.avd and not self.avd_first:
            out = self.avd_layer(out)
        out = self.bn3(self.conv3(out))
        if self.dropblock_prob > 0.0:
            out = self.dropblock3(out)
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(out + identity)


class ResNeSt(nn.Module):
    """ResNet variants of the ResNeSt paper: a 7x7 or deep 3-conv stem (``deep_stem``), average-pool
    downsampling (``avg_down``), split attention (``radix``). ``LAST_STRIDE 1`` keeps layer4 at
    stride 1 and dilates its later blocks by 2 (``dilated`` or ``dilation`` 4 dilate layers 3-4).
    ``norm_layer`` is a norm name or factory for :func:`~fastreid.layers.get_norm`."""

    def __init__(
        self,
        last_stride: int,
        block: type[Bottleneck],
        layers: list[int],
        radix: int = 1,
        groups: int = 1,
        bottleneck_width: int = 64,
        dilated: bool = False,
        dilation: int = 1,
        deep_stem: bool = False,
        stem_width: int = 64,
        avg_down: bool = False,
        rectified_conv: bool = False,
        rectify_avg: bool = False,
        avd: bool = False,
        avd_first: bool = False,
        final_drop: float = 0.0,
        dropblock_prob: float = 0,
        last_gamma: bool = False,
        norm_layer: NormSpec = "BN",
    ) -> None:
        super().__init__()
        if last_stride == 1:
            dilation = 2
        self.cardinality = groups
        self.bottleneck_width = bottleneck_width
        self.inplanes = stem_width * 2 if deep_stem else 64
        self.avg_down = avg_down
        self.last_gamma = last_gamma
        self.radix = radix
        self.avd = avd
        self.avd_first = avd_first
        self.rectified_conv = rectified_conv
        self.rectify_avg = rectify_avg
        conv, extra = (
            (_rectified_conv, {"average_mode": rectify_avg}) if rectified_conv else (_plain_conv, {})
        )
        if deep_stem:
            self.conv1: nn.Module = nn.Sequential(
                conv(3, stem_width, kernel_size=3, stride=2, padding=1, bias=False, **extra),
                get_norm(norm_layer, stem_width),
                nn.ReLU(inplace=True),
                conv(stem_width, stem_width, kernel_size=3, stride=1, padding=1, bias=False, **extra),
                get_norm(norm_layer, stem_width),
                nn.ReLU(inplace=True),
                conv(stem_width, stem_width * 2, kernel_size=3, stride=1, padding=1, bias=False, **extra),
            )
        else:
            self.conv1 = conv(3, 64, kernel_size=7, stride=2, padding=3, bias=False, **extra)
        self.bn1 = get_norm(norm_layer, self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, 64, layers[0], norm_layer=norm_layer, is_first=False)
        self.layer2 = self._make_layer(block, 128, layers[1], stride=2, norm_layer=norm_layer)
        if dilated or dilation == 4:
            layer3_stride, layer3_dilation, layer4_stride, layer4_dilation = 1, 2, 1, 4
        elif dilation == 2:
            layer3_stride, layer3_dilation, layer4_stride, layer4_dilation = 2, 1, 1, 2
        else:
            layer3_stride, layer3_dilation, layer4_stride, layer4_dilation = 2, 1, 2, 1
        self.layer3 = self._make_layer(
            block, 256, layers[2], layer3_stride, layer3_dilation, norm_layer, dropblock_prob
        )
        self.layer4 = self._make_layer(
            block, 512, layers[3], layer4_stride, layer4_dilation, norm_layer, dropblock_prob
        )
        self.drop = nn.Dropout(final_drop) if final_drop > 0.0 else None
        self.out_channels = 512 * block.expansion
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                n = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
                nn.init.normal_(m.weight, 0, math.sqrt(2.0 / n))

    def _make_layer(
        self,
        block: type[Bottleneck],
        planes: int,
        blocks: int,
        stride: int = 1,
        dilation: int = 1,
        norm_layer: NormSpec | None = None,
        dropblock_prob: float = 0.0,
        is_first: bool = True,
    ) -> nn.Sequential:
        if dilation not in (1, 2, 4):
            raise ValueError(f"ResNeSt: unknown dilation size {dilation}")
        assert norm_layer is not None  # ResNeSt always passes its norm
        out = planes * block.expansion
        downsample = None
        if stride != 1 or self.inplanes != out:
            down: list[nn.Module] = []
            if self.avg_down:
                pool = stride if dilation == 1 else 1
                down.append(nn.AvgPool2d(pool, stride=pool, ceil_mode=True, count_include_pad=False))
                down.append(nn.Conv2d(self.inplanes, out, kernel_size=1, stride=1, bias=False))
            else:
                down.append(nn.Conv2d(self.inplanes, out, kernel_size=1, stride=stride, bias=False))
            down.append(get_norm(norm_layer, out))
            downsample = nn.Sequential(*down)
        common: dict[str, Any] = {
            "radix": self.radix,
            "cardinality": self.cardinality,
            "bottleneck_width": self.bottleneck_width,
            "avd": self.avd,
            "avd_first": self.avd_first,
            "rectified_conv": self.rectified_conv,
            "rectify_avg": self.rectify_avg,
            "norm_layer": norm_layer,
            "dropblock_prob": dropblock_prob,
            "last_gamma": self.last_gamma,
        }
        # the first block of a dilated stage has half the dilation (none for dilation 2)
        first = block(
            self.inplanes,
            planes,
            stride,
            downsample,
            dilation=2 if dilation == 4 else 1,
            is_first=is_first,
            **common,
        )
        self.inplanes = out
        rest = [block(out, planes, dilation=dilation, **common) for _ in range(1, blocks)]
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
    model = ResNeSt(
        bb.LAST_STRIDE,
        Bottleneck,
        layers,
        radix=2,
        groups=1,
        bottleneck_width=64,
        deep_stem=True,
        stem_width=stem_width,
        avg_down=True,
        avd=True,
        avd_first=False,
        norm_layer=backbone_norm(cfg),
    )
    if bb.PRETRAIN:
        load_pretrained_backbone(
            model,
            bb.PRETRAIN_PATH,
            None,
            f"ResNeSt-{depth[:-1]}",
            source=pretrained_weights_for("resnest", depth),
        )
    return model
