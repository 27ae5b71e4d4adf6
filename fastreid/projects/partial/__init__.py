"""Partial person re-identification (upstream FastReID's ``projects/PartialReID``, package
``partialreid``): deep spatial feature reconstruction (DSR).

Importing this package registers upstream's names: the test sets ``PartialREID``,
``PartialiLIDS`` and ``OccludedREID`` (``DATASET_REGISTRY``), the head ``DSRHead``, the meta
architecture ``PartialBaseline`` and its trainer for ``fastreid-train``
(:mod:`fastreid.engine.trainers`), which evaluates with :class:`DsrEvaluator`. A config file
naming any of those names imports it and gets its key (:func:`add_partialreid_config`, through
:mod:`fastreid.config.families`), so::

    fastreid-train --config-file configs/PartialReID/partial_market.yml

trains on Market-1501 and evaluates on the three partial sets (Rank-1/5/10, mAP, mINP). Code
written for upstream's project changes ``from partialreid import *`` to
``from fastreid.projects.partial import *``. docs/partial.md has the layouts and the definitions.
"""

from .config import add_partialreid_config
from .dsr_distance import compute_dsr_dist
from .dsr_evaluation import DsrEvaluator
from .dsr_head import DSRHead, OcclusionUnit
from .partial_dataset import PARTIAL_DATASETS, OccludedREID, PartialiLIDS, PartialREID
from .partialbaseline import PartialBaseline
from .trainer import PartialTrainer

__all__ = [
    "DSRHead",
    "DsrEvaluator",
    "OccludedREID",
    "OcclusionUnit",
    "PARTIAL_DATASETS",
    "PartialBaseline",
    "PartialREID",
    "PartialTrainer",
    "PartialiLIDS",
    "add_partialreid_config",
    "compute_dsr_dist",
]
