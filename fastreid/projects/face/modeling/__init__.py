"""The face model: the IResNet backbones (``build_iresnet_backbone``, ``build_resnetIR_backbone``
in ``BACKBONE_REGISTRY``), ``FaceHead`` (``REID_HEADS_REGISTRY``), ``FaceBaseline``
(``META_ARCH_REGISTRY``) and the Partial FC classifier."""

from .face_baseline import FaceBaseline
from .face_head import FaceHead
from .iresnet import IResNet, build_iresnet_backbone, build_resnetIR_backbone
from .partial_fc import PartialFC, class_shard

__all__ = [
    "FaceBaseline",
    "FaceHead",
    "IResNet",
    "PartialFC",
    "build_iresnet_backbone",
    "build_resnetIR_backbone",
    "class_shard",
]
