"""``Hymenoptera`` (upstream FastClas's ``bee_ant.py``): the ants-and-bees set of PyTorch's
transfer-learning tutorial, ``hymenoptera_data/{train,val}/{ants,bees}/*.jpg``."""

from __future__ import annotations

from fastreid.data.datasets import DATASET_REGISTRY
from fastreid.projects.registration import register_once

from .folders import ImageFolderDataset

__all__ = ["Hymenoptera"]


class Hymenoptera(ImageFolderDataset):
    """Ants and bees: 245 training and 153 validation images in the published set."""

    dataset_dir = "hymenoptera_data"
    dataset_name = "hyt"
    url = "https://download.pytorch.org/tutorial/hymenoptera_data.zip"
    layout = (
        "{root}/hymenoptera_data/\n  train/ants/*.jpg  train/bees/*.jpg\n  val/ants/*.jpg    val/bees/*.jpg\n"
    )
    synthetic_command = "python -m fastreid.data.synthetic.classes --root {root}"


register_once(DATASET_REGISTRY, Hymenoptera)
