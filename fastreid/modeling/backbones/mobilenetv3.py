"""MobileNetV3 Large/Small with upstream FastReID's keys: torchvision's ``features`` (built with
``MODEL.BACKBONE.NORM``) followed by ``conv``, a 1x1 conv + norm + ReLU6 to 1280 (Large) or 1024
(Small) channels, as upstream adds it. Pretrained weights: torchvision's ImageNet ``features``."""

from __future__ import annotations

import functools

import torch
import torchvision.models as tvm
from torch import nn

from fastreid.config import ConfigError
from fastreid.layers import get_norm
from fastreid.layers.batch_norm import NormSpec

from .build import BACKBONE_REGISTRY
from .pretrained import load_pretrained_backbone

__all__ = ["MobileNetV3", "build_mobilenetv3_backbone", "MOBILENETV3_VARIANTS"]

# DEPTH -> (torchvision builder, its weights enum, output channels)
MOBILENETV3_VARIANTS = {
    "Large": ("mobilenet_v3_large", "MobileNet_V3_Large_Weights", 1280),
    "Small": ("mobilenet_v3_small", "MobileNet_V3_Small_Weights", 1024),
}


class MobileNetV3(nn.Module):
    def __init__(self, norm: NormSpec, variant: str) -> None:
        super().__init__()
        builder, _, last_channel = MOBILENETV3_VARIANTS[variant]
        tv_model = getattr(tvm, builder)(weights=None, norm_layer=functools.partial(get_norm, norm))
        self.features = tv_model.features
        in_channels = self.features[-1].out_channels
        self.conv = nn.Sequential(
            nn.Conv2d(in_channels, last_channel, 1, 1, 0, bias=False),
            get_norm(norm, last_channel),
            nn.ReLU6(inplace=True),
        )
        self.out_channels = last_channel
        for m in self.conv.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(self.features(x))


@BACKBONE_REGISTRY.register()
def build_mobilenetv3_backbone(cfg) -> MobileNetV3:
    """MobileNetV3 from ``MODEL.BACKBONE.*`` (DEPTH Large or Small, NORM, PRETRAIN[_PATH])."""
    bb = cfg.MODEL.BACKBONE
    variant = str(bb.DEPTH).capitalize()
    if variant not in MOBILENETV3_VARIANTS:
        raise ConfigError(
            f"MODEL.BACKBONE.DEPTH {bb.DEPTH!r} is not a MobileNetV3 variant; expected Large or Small"
        )
    model = MobileNetV3(bb.NORM, variant)
    if bb.PRETRAIN:
        weights = getattr(tvm, MOBILENETV3_VARIANTS[variant][1]).IMAGENET1K_V1
        load_pretrained_backbone(
            model, bb.PRETRAIN_PATH, weights, f"MobileNetV3-{variant}", drop_prefixes=("classifier.",)
        )
    return model
