"""Image retrieval (upstream FastReID's ``projects/FastRetri``, package ``fastretri``).

Importing this package registers upstream's data set names ``CUB``, ``Cars196``, ``SOP`` and
``InShop`` (``DATASET_REGISTRY``) and their trainer for ``fastreid-train``
(:mod:`fastreid.engine.trainers`). A config file naming any of them imports it and gets its key
(:func:`add_retri_config`: ``TEST.RECALLS``, through :mod:`fastreid.config.families`), so::

    fastreid-train --config-file configs/Retri/cub.yml

trains the standard ``Baseline`` on the training classes and evaluates Recall@K and mAP@R on the
unseen test classes. Code written for upstream's project changes ``from fastretri import *`` to
``from fastreid.projects.retri import *``. docs/retrieval.md has the data layouts and the metrics'
definitions.
"""

from .config import DEFAULT_RECALLS, add_retri_config
from .datasets import CUB, RETRIEVAL_DATASETS, SOP, Cars196, InShop, read_label_file
from .retri_evaluator import RetriEvaluator, label_codes, recall_at_ks, retrieval_metrics
from .trainer import RetriTrainer, is_retrieval_dataset

__all__ = [
    "CUB",
    "Cars196",
    "DEFAULT_RECALLS",
    "InShop",
    "RETRIEVAL_DATASETS",
    "RetriEvaluator",
    "RetriTrainer",
    "SOP",
    "add_retri_config",
    "is_retrieval_dataset",
    "label_codes",
    "read_label_file",
    "recall_at_ks",
    "retrieval_metrics",
]
