"""Models: backbones, heads, losses and meta-architectures (upstream FastReID's layout and keys)."""

from .backbones import BACKBONE_REGISTRY, build_backbone
from .freeze import freeze_modules, unfreeze_modules
from .heads import HEADS_REGISTRY, REID_HEADS_REGISTRY, build_heads
from .meta_arch import META_ARCH_REGISTRY, Baseline, build_model

__all__ = [
    "BACKBONE_REGISTRY",
    "HEADS_REGISTRY",
    "REID_HEADS_REGISTRY",
    "META_ARCH_REGISTRY",
    "Baseline",
    "build_backbone",
    "build_heads",
    "build_model",
    "freeze_modules",
    "unfreeze_modules",
]
