"""Pedestrian attribute recognition (upstream FastReID's ``projects/FastAttr``, package ``fastattr``).

Importing this package registers upstream's names: the data sets ``PA100K``, ``Market1501Attr``
and ``DukeMTMCAttr`` (``DATASET_REGISTRY``), the head ``AttrHead`` and the meta architecture
``AttrBaseline``, and the trainer of ``AttrBaseline`` for ``fastreid-train``
(:mod:`fastreid.engine.trainers`). A config file naming any of those names imports it and gets
its keys (:func:`add_attr_config`, through :mod:`fastreid.config.families`), so::

    fastreid-train --config-file configs/Attr/pa100.yml

trains and evaluates (mA, Accu, Prec, Recall, F1). Code written for upstream's project changes
``from fastattr import *`` to ``from fastreid.projects.attr import *``. docs/attributes.md has
the data layouts and the metrics' definitions.
"""

from .attr_dataset import AttrDataset
from .attr_evaluation import AttrEvaluator
from .config import add_attr_config
from .datasets import ATTRIBUTE_DATASETS, PA100K, DukeMTMCAttr, Market1501Attr
from .modeling import AttrBaseline, AttrHead, cross_entropy_sigmoid_loss
from .trainer import AttrTrainer

__all__ = [
    "ATTRIBUTE_DATASETS",
    "AttrBaseline",
    "AttrDataset",
    "AttrEvaluator",
    "AttrHead",
    "AttrTrainer",
    "DukeMTMCAttr",
    "Market1501Attr",
    "PA100K",
    "add_attr_config",
    "cross_entropy_sigmoid_loss",
]
