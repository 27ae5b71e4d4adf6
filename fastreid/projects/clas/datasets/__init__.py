"""The image classification data sets, registered in ``DATASET_REGISTRY`` under upstream's names."""

from .bee_ant import Hymenoptera
from .folders import ImageFolderDataset, image_format, read_class_folders

__all__ = [
    "CLASSIFICATION_DATASETS",
    "Hymenoptera",
    "ImageFolderDataset",
    "image_format",
    "read_class_folders",
]

#: The classification data sets of this family, by their config names.
CLASSIFICATION_DATASETS = {cls.__name__: cls for cls in (Hymenoptera,)}
