"""IResNet, the improved residual network of ArcFace / InsightFace (upstream FastFace's
``modeling/iresnet.py``): BN-Conv-BN-PReLU-Conv-BN blocks, a 3x3 stem of stride 1 and four stages
of stride 2, so a 112x112 face gives 512 x 7 x 7 features (``MODEL.BACKBONE.FEAT_DIM`` 25088 with
the ``Flatten`` pooling). State-dict keys are upstream's (``conv1``, ``bn1``, ``prelu``,
``layerL.B.{bn1,conv1,bn2,prelu,conv2,bn3,downsample}``, ``bn2``)."""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from fastreid.config import ConfigError
from fastreid.layers import SELayer, get_norm
from fastreid.modeling.backbones import BACKBONE_REGISTRY

from ...registration import register_once

__all__ = ["IBasicBlock", "IResNet", "build_iresnet_backbone", "build_resnetIR_backbone", "IRESNET_DEPTHS"]

#: ``MODEL.BACKBONE.DEPTH`` -> blocks per stage (upstream's table).
IRESNET_DEPTHS = {
    "18x": [2, 2, 2, 2],
    "34x": [3, 4, 6, 3],
    "50x": [3, 4, 14, 3],
    "100x": [3, 13, 30, 3],
    "200x": [6, 26, 60, 6],
}


def conv3x3(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


def conv1x1(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class IBasicBlock(nn.Module):
    """BN, 3x3 conv, BN, PReLU, 3x3 conv (stride), BN, an optional squeeze-excitation gate
    (``se``, the IR-SE variant), plus the shortcut."""

    expansion = 1

    def __init__(
        self,
        inplanes: int,
        planes: int,
        bn_norm: str,
        stride: int = 1,
        downsample: Optional[nn.Module] = None,
        with_se: bool = False,
    ) -> None:
        super().__init__()
        self.bn1 = get_norm(bn_norm, inplanes)
        self.conv1 = conv3x3(inplanes, planes)
        self.bn2 = get_norm(bn_norm, planes)
        self.prelu = nn.PReLU(planes)
        self.conv2 = conv3x3(planes, planes, stride)
        self.bn3 = get_norm(bn_norm, planes)
        self.se = SELayer(planes) if with_se else None
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn3(self.conv2(self.prelu(self.bn2(self.conv1(self.bn1(x))))))
        if self.se is not None:
            out = self.se(out)
        identity = x if self.downsample is None else self.downsample(x)
        return out + identity


class IResNet(nn.Module):
    """Stem (3x3 conv 64, BN, PReLU), four stages of 64, 128, 256, 512 channels (stride 2 each),
    BN, dropout. Returns the N x 512 x H/16 x W/16 feature map."""

    fc_scale = 7 * 7

    def __init__(
        self,
        block: type[IBasicBlock],
        layers: list[int],
        bn_norm: str,
        dropout: float = 0.0,
        zero_init_residual: bool = False,
        with_se: bool = False,
    ) -> None:
        super().__init__()
        self.inplanes = 64
        self.with_se = with_se
        self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = get_norm(bn_norm, self.inplanes)
        self.prelu = nn.PReLU(self.inplanes)
        self.layer1 = self._make_layer(block, 64, layers[0], bn_norm, stride=2)
        self.layer2 = self._make_layer(block, 128, layers[1], bn_norm, stride=2)
        self.layer3 = self._make_layer(block, 256, layers[2], bn_norm, stride=2)
        self.layer4 = self._make_layer(block, 512, layers[3], bn_norm, stride=2)
        self.bn2 = get_norm(bn_norm, 512 * block.expansion)
        self.dropout = nn.Dropout(p=dropout, inplace=True)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.normal_(m.weight, 0, 0.1)
            elif "Norm" in type(m).__name__ and isinstance(getattr(m, "weight", None), torch.Tensor):
                nn.init.constant_(m.weight, 1)  # type: ignore[arg-type]  # a norm layer's affine weight
                nn.init.constant_(m.bias, 0)  # type: ignore[arg-type]
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, IBasicBlock):
                    nn.init.constant_(m.bn2.weight, 0)  # type: ignore[arg-type]  # its affine weight

    def _make_layer(
        self, block: type[IBasicBlock], planes: int, blocks: int, bn_norm: str, stride: int
    ) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                conv1x1(self.inplanes, planes * block.expansion, stride),
                get_norm(bn_norm, planes * block.expansion),
            )
        layers = [block(self.inplanes, planes, bn_norm, stride, downsample, with_se=self.with_se)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes, bn_norm, with_se=self.with_se))
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.prelu(self.bn1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.dropout(self.bn2(x))


def _build(cfg, with_se: bool) -> IResNet:
    depth = cfg.MODEL.BACKBONE.DEPTH
    if depth not in IRESNET_DEPTHS:
        raise ConfigError(
            f"MODEL.BACKBONE.DEPTH {depth!r} is not an IResNet depth; use one of {', '.join(IRESNET_DEPTHS)}"
        )
    dropout = cfg.MODEL.BACKBONE.get("DROPOUT", 0.0)
    return IResNet(IBasicBlock, IRESNET_DEPTHS[depth], cfg.MODEL.BACKBONE.NORM, dropout, with_se=with_se)


def build_iresnet_backbone(cfg) -> IResNet:
    """IResNet of ``MODEL.BACKBONE.DEPTH`` (18x, 34x, 50x, 100x, 200x) with ``NORM`` and
    ``DROPOUT`` (upstream's builder; ``WITH_SE`` is not read, as upstream)."""
    return _build(cfg, with_se=False)


def build_resnetIR_backbone(cfg) -> IResNet:
    """The name upstream's ``configs/r101_ir.yml`` uses, which upstream's code never defines: the
    IResNet with a squeeze-excitation gate in every block when ``MODEL.BACKBONE.WITH_SE`` (the
    IR-SE networks of the results upstream reports)."""
    return _build(cfg, with_se=bool(cfg.MODEL.BACKBONE.WITH_SE))


register_once(BACKBONE_REGISTRY, build_iresnet_backbone)
register_once(BACKBONE_REGISTRY, build_resnetIR_backbone)
