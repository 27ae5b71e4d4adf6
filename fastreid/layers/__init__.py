"""Building blocks shared by backbones and heads (upstream FastReID's ``fastreid.layers``):
activations, normalisations, pooling, attention blocks, drop regularisers, initialisers."""

from .activation import GELU, MemoryEfficientSwish, Mish, Swish
from .any_softmax import CLS_LAYERS, ArcSoftmax, CircleSoftmax, CosSoftmax, Linear, build_cls_layer
from .batch_norm import IBN, NORM_NAMES, BatchNorm, FrozenBatchNorm, GhostBatchNorm, SyncBatchNorm, get_norm
from .context_block import ContextBlock
from .drop import DropBlock2d, DropPath, drop_block_2d, drop_path
from .frn import FRN, TLU
from .gather_layer import GatherLayer
from .helpers import make_divisible, to_2tuple, to_3tuple, to_4tuple, to_ntuple
from .non_local import Non_local, NonLocal
from .pooling import POOL_LAYERS, GeneralizedMeanPooling, GeneralizedMeanPoolingP, build_pooling
from .se_layer import SELayer
from .splat import DropBlock2D, SplAtConv2d
from .weight_init import (
    lecun_normal_,
    trunc_normal_,
    variance_scaling_,
    weights_init_classifier,
    weights_init_kaiming,
)

__all__ = [
    "GELU", "MemoryEfficientSwish", "Mish", "Swish",
    "CLS_LAYERS", "ArcSoftmax", "CircleSoftmax", "CosSoftmax", "Linear", "build_cls_layer",
    "IBN", "NORM_NAMES", "BatchNorm", "FrozenBatchNorm", "GhostBatchNorm", "SyncBatchNorm", "get_norm",
    "ContextBlock", "DropBlock2d", "DropPath", "drop_block_2d", "drop_path", "FRN", "TLU", "GatherLayer",
    "make_divisible", "to_2tuple", "to_3tuple", "to_4tuple", "to_ntuple", "NonLocal", "Non_local",
    "POOL_LAYERS", "GeneralizedMeanPooling", "GeneralizedMeanPoolingP", "build_pooling", "SELayer",
    "DropBlock2D", "SplAtConv2d",
    "lecun_normal_", "trunc_normal_", "variance_scaling_", "weights_init_classifier", "weights_init_kaiming",
]  # fmt: skip
