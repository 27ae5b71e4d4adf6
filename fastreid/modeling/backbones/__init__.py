"""Backbones: ResNet (IBN-a, non-local, SE) and OSNet. Importing registers them."""

from .build import BACKBONE_REGISTRY, UNSUPPORTED_BACKBONES, build_backbone, supported_backbones
from .mobilenetv3 import MobileNetV3, build_mobilenetv3_backbone
from .osnet import OSNet, build_osnet_backbone
from .repvgg import RepVGG, build_repvgg_backbone
from .resnet import ResNet, build_resnet_backbone
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
    "MobileNetV3",
    "build_mobilenetv3_backbone",
    "RepVGG",
    "build_repvgg_backbone",
    "VisionTransformer",
    "build_vit_backbone",
]
