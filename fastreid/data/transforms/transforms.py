"""Seeded image transforms on uint8 tensors (upstream's module path; the code lives in the modules
below, one job each, and is re-exported here).

Every transform is called as ``t(img, g)``: ``img`` a ``torch.uint8`` tensor 3xHxW (RGB, 0..255)
and ``g`` the sample's ``torch.Generator``. All random parameters are drawn from ``g`` (never
from the global RNGs, which thread workers share), so a sample's augmentation depends only on
its key: the same batches come out whatever the loader mode. Pixels stay uint8 on the 0..255
scale; normalisation is done by the model.

- :mod:`.pipeline`: ``Compose``, ``ToUint8``, ``hwc_array_to_tensor`` (the pipeline's ends)
- :mod:`.geometric`: ``Resize``, ``CenterCrop``, ``RandomResizedCrop``, ``RandomHorizontalFlip``,
  ``PadRandomCrop``, ``RandomAffine``
- :mod:`.colour`: ``ColorJitter``
- :mod:`.autoaugment`: ``AutoAugment``, ``AugMix`` and their operations (``apply_op``)
- :mod:`.erasing`: ``RandomErasing``, ``RandomPatch``
- :mod:`.draws`: the random draws from ``g`` they all use
"""

from __future__ import annotations

from .autoaugment import AugMix, AutoAugment
from .autoaugment import apply_op as apply_op
from .colour import ColorJitter
from .draws import chance as chance
from .draws import numpy_rng as numpy_rng
from .draws import randint as randint
from .draws import uniform as uniform
from .erasing import RandomErasing, RandomPatch
from .geometric import (
    CenterCrop,
    PadRandomCrop,
    RandomAffine,
    RandomHorizontalFlip,
    RandomResizedCrop,
    Resize,
)
from .geometric import Size as Size
from .pipeline import Compose, ToUint8, hwc_array_to_tensor

__all__ = [
    "Compose",
    "hwc_array_to_tensor",
    "Resize",
    "CenterCrop",
    "RandomResizedCrop",
    "RandomHorizontalFlip",
    "PadRandomCrop",
    "ColorJitter",
    "RandomAffine",
    "AutoAugment",
    "AugMix",
    "RandomErasing",
    "RandomPatch",
    "ToUint8",
]
