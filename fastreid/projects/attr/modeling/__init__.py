"""The attribute model: ``AttrHead`` (in ``REID_HEADS_REGISTRY``), ``AttrBaseline`` (in
``META_ARCH_REGISTRY``) and the weighted binary cross-entropy."""

from .attr_baseline import AttrBaseline
from .attr_head import AttrHead
from .bce_loss import cross_entropy_sigmoid_loss, ratio2weight

__all__ = ["AttrBaseline", "AttrHead", "cross_entropy_sigmoid_loss", "ratio2weight"]
