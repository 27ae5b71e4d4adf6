"""Building blocks shared by backbones and heads (upstream FastReID's ``fastreid.layers``).

``from fastreid.layers import *`` gives upstream's names, plus this package's builders
(``build_pooling``, ``build_cls_layer``) and norms. The classifier layers (``Linear``,
``CosSoftmax``, ...) stay in :mod:`.any_softmax` and the pooling layers in :mod:`.pooling`, as
upstream keeps them out of the star import (``Linear`` would shadow other names).
"""

from .activation import GELU, MemoryEfficientSwish, Mish, Swish
from .any_softmax import CLS_LAYERS, build_cls_layer
from .any_softmax import ArcSoftmax as ArcSoftmax  # importable, not star-exported (as upstream)
from .any_softmax import CircleSoftmax as CircleSoftmax
from .any_softmax import CosSoftmax as CosSoftmax
from .any_softmax import Linear as Linear
from .batch_norm import IBN, NORM_NAMES, BatchNorm, FrozenBatchNorm, GhostBatchNorm, SyncBatchNorm, get_norm
from .context_block import ContextBlock
from .drop import DropBlock2d, DropPath, drop_block_2d, drop_path
from .frn import FRN, TLU
from .gather_layer import GatherLayer
from .helpers import make_divisible, to_2tuple, to_3tuple, to_4tuple, to_ntuple
from .non_local import Non_local
from .pooling import POOL_LAYERS, build_pooling
from .pooling import GeneralizedMeanPooling as GeneralizedMeanPooling
from .pooling import GeneralizedMeanPoolingP as GeneralizedMeanPoolingP
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
    # upstream's star exports
    "ContextBlock",
    "DropBlock2D",
    "DropBlock2d",
    "DropPath",
    "FRN",
    "GELU",
    "GatherLayer",
    "IBN",
    "MemoryEfficientSwish",
    "Mish",
    "Non_local",
    "SELayer",
    "SplAtConv2d",
    "Swish",
    "TLU",
    "drop_block_2d",
    "drop_path",
    "get_norm",
    "lecun_normal_",
    "make_divisible",
    "to_2tuple",
    "to_3tuple",
    "to_4tuple",
    "to_ntuple",
    "trunc_normal_",
    "variance_scaling_",
    "weights_init_classifier",
    "weights_init_kaiming",
    # this package's
    "BatchNorm",
    "FrozenBatchNorm",
    "GhostBatchNorm",
    "SyncBatchNorm",
    "NORM_NAMES",
    "CLS_LAYERS",
    "build_cls_layer",
    "POOL_LAYERS",
    "build_pooling",
]
