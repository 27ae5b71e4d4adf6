"""Upstream FastReID's import path for image reading and the loader, kept for users' code
(``from fastreid.data.data_utils import DataLoaderX, read_image``).

The code lives in :mod:`fastreid.data.images` and the :mod:`fastreid.data.loading` package.
"""

from fastreid.data.images import ImageReadError, ImageTooLargeError, read_image, read_image_tensor
from fastreid.data.loading.errors import SampleLoadError
from fastreid.data.loading.loader import DataLoaderX
from fastreid.data.loading.prefetch import BackgroundGenerator, CudaPrefetcher, apply_to_tensors, pin_batch
from fastreid.data.loading.workers import WorkerInit

__all__ = [
    "ImageReadError",
    "ImageTooLargeError",
    "read_image",
    "read_image_tensor",
    "apply_to_tensors",
    "pin_batch",
    "BackgroundGenerator",
    "CudaPrefetcher",
    "DataLoaderX",
    "SampleLoadError",
    "WorkerInit",
]
