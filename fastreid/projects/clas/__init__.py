"""Image classification (upstream FastReID's ``projects/FastClas``, package ``fastclas``).

Importing this package registers upstream's names: the data set ``Hymenoptera``
(``DATASET_REGISTRY``) and the trainer of its image-folder data sets for ``fastreid-train``
(:mod:`fastreid.engine.trainers`; upstream's config trains the plain ``Baseline`` with
``ClasHead``, so the data set, not the model, says it is a classification run). A config file naming either imports it (:mod:`fastreid.config.families`), so::

    fastreid-train --config-file configs/Clas/base-clas.yml

trains and evaluates (``Acc@1``, and ``Acc@5`` with more than 5 classes). Code written for
upstream's project changes ``from fastclas import *`` to ``from fastreid.projects.clas import *``
(upstream's ``fastclas/__init__.py`` also imports a ``distracted_driver`` module that its
repository does not contain, so it does not import as shipped). docs/classification.md has the
data layout and the metrics.
"""

from .config import add_clas_config
from .dataset import ClasDataset, UnknownClassError
from .datasets import CLASSIFICATION_DATASETS, Hymenoptera, ImageFolderDataset
from .trainer import IDX2CLASS_FILE, ClasTrainer, classification_dataset

__all__ = [
    "CLASSIFICATION_DATASETS",
    "ClasDataset",
    "ClasTrainer",
    "Hymenoptera",
    "IDX2CLASS_FILE",
    "ImageFolderDataset",
    "UnknownClassError",
    "add_clas_config",
    "classification_dataset",
]
