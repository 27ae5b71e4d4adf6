"""Re-ID datasets: ``DATASET_REGISTRY`` maps config names (``DATASETS.NAMES``) to classes."""

from fastreid.utils.registry import Registry

DATASET_REGISTRY = Registry("DATASET")
DATASET_REGISTRY.__doc__ = """Registry of re-ID datasets: ``cls(root=..., **kwargs)`` with .train/.query/.gallery."""

from .bases import Dataset, DatasetNotFoundError, ImageDataset  # noqa: E402
from .cuhk03 import CUHK03  # noqa: E402
from .dukemtmcreid import DukeMTMC  # noqa: E402
from .generic import CustomReID, register_folder_dataset  # noqa: E402
from .market1501 import Market1501  # noqa: E402
from .msmt17 import MSMT17  # noqa: E402

__all__ = [
    "DATASET_REGISTRY",
    "Dataset",
    "ImageDataset",
    "DatasetNotFoundError",
    "Market1501",
    "DukeMTMC",
    "MSMT17",
    "CUHK03",
    "CustomReID",
    "register_folder_dataset",
]
