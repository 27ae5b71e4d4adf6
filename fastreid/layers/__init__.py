"""Building blocks shared by backbones and heads."""

from .any_softmax import CLS_LAYERS, ArcSoftmax, CircleSoftmax, CosSoftmax, Linear, build_cls_layer
from .batch_norm import IBN, NORM_NAMES, BatchNorm, FrozenBatchNorm, GhostBatchNorm, SyncBatchNorm, get_norm
from .non_local import Non_local, NonLocal
from .pooling import POOL_LAYERS, GeneralizedMeanPooling, GeneralizedMeanPoolingP, build_pooling
from .se_layer import SELayer
from .weight_init import weights_init_classifier, weights_init_kaiming

__all__ = [
    "CLS_LAYERS",
    "ArcSoftmax",
    "CircleSoftmax",
    "CosSoftmax",
    "Linear",
    "build_cls_layer",
    "IBN",
    "NonLocal",
    "Non_local",
    "NORM_NAMES",
    "BatchNorm",
    "FrozenBatchNorm",
    "GhostBatchNorm",
    "SyncBatchNorm",
    "get_norm",
    "POOL_LAYERS",
    "GeneralizedMeanPooling",
    "GeneralizedMeanPoolingP",
    "build_pooling",
    "SELayer",
    "weights_init_classifier",
    "weights_init_kaiming",
]
