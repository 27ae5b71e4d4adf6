"""RegNet and EfficientNet backbones (upstream FastReID's ``regnet`` package, pycls's networks)."""

from .effnet import EffNet, build_effnet_backbone
from .regnet import RegNet, build_regnet_backbone

__all__ = ["EffNet", "RegNet", "build_effnet_backbone", "build_regnet_backbone"]
