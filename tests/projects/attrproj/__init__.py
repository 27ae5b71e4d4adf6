"""An attribute-recognition project in the shape of upstream's FastAttr, written for these tests:
``from attrproj import *`` registers its data set, head and meta-architecture."""

from .attr_dataset import AttrDataset
from .config import add_attr_config
from .datasets import TinyPeopleAttr
from .evaluation import AttrEvaluator
from .modeling import TinyAttrBaseline, TinyAttrHead, weighted_bce_loss

__all__ = [
    "AttrDataset",
    "AttrEvaluator",
    "TinyAttrBaseline",
    "TinyAttrHead",
    "TinyPeopleAttr",
    "add_attr_config",
    "weighted_bce_loss",
]
