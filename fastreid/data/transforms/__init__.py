"""Seeded uint8 transforms, ``transform(img, g)``, built from the INPUT config keys."""

from .build import build_transforms, input_size
from .transforms import *  # noqa: F403
from .transforms import __all__ as _transform_names

__all__ = ["build_transforms", "input_size", *_transform_names]
