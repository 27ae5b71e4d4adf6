"""Backbones under upstream FastReID's registry names (docs/MODEL_ZOO.md). Importing registers them."""

from .build import BACKBONE_REGISTRY, UNSUPPORTED_BACKBONES, build_backbone, supported_backbones
from .mobilenet import MobileNetV2, build_mobilenetv2_backbone
from .mobilenetv3 import MobileNetV3, build_mobilenetv3_backbone
from .osnet import OSNet, build_osnet_backbone
from .regnet import EffNet, RegNet, build_effnet_backbone, build_regnet_backbone
from .repvgg import RepVGG, build_repvgg_backbone
from .resnest import ResNeSt, build_resnest_backbone
from .resnet import ResNet, build_resnet_backbone
from .resnext import ResNeXt, build_resnext_backbone
from .shufflenet import ShuffleNetV2, build_shufflenetv2_backbone
from .vision_transformer import VisionTransformer, build_vit_backbone

__all__ = [
    "BACKBONE_REGISTRY",
    "UNSUPPORTED_BACKBONES",
    "build_backbone",
    "supported_backbones",
    "OSNet",
    "ResNet",
    "build_osnet_backbone",
    "build_resnet_backbone",
    "ResNeSt",
    "build_resnest_backbone",
    "ResNeXt",
    "build_resnext_backbone",
    "MobileNetV2",
    "build_mobilenetv2_backbone",
    "ShuffleNetV2",
    "build_shufflenetv2_backbone",
    "RegNet",
    "build_regnet_backbone",
    "EffNet",
    "build_effnet_backbone",
    "MobileNetV3",
    "build_mobilenetv3_backbone",
    "RepVGG",
    "build_repvgg_backbone",
    "VisionTransformer",
    "build_vit_backbone",
]
