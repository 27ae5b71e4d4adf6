"""Image transforms, built from the INPUT config keys (``build_transforms``): the seeded uint8
pipeline (:mod:`.transforms`, :mod:`.autoaugment`, :mod:`.functional`) and upstream's PIL
augmentation API."""

from .autoaugment import AutoAugment
from .build import build_transforms, input_size
from .transforms import *  # noqa: F403
from .transforms import __all__ as _transform_names

__all__ = ["AutoAugment", "build_transforms", "input_size", *_transform_names]
