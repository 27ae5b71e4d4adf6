"""``AttrDataset``: images with multi-hot attribute labels, what the attribute loaders index
(upstream FastAttr's ``AttrDataset``, with this package's image reading and per-sample seeds)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional, Union

import numpy as np
import torch

from fastreid.data.common import ImageItems
from fastreid.data.loading.seeds import SampleKey, sample_index, sample_seed

__all__ = ["AttrDataset"]


class AttrDataset(ImageItems):
    """Items ``(img_path, labels)`` -> ``{"images", "targets", "img_paths"}``, ``targets`` the
    float32 label vector (one value per attribute of ``attr_dict``).

    As :class:`~fastreid.data.common.CommDataset`: ``__getitem__`` takes a :class:`SampleKey` (or a
    plain index), the image is decoded (refused beyond ``max_pixels``) or read from the decoded
    cache, and the transform gets ``torch.Generator().manual_seed(key.seed)``.
    """

    accepts_sample_keys = True

    def __init__(
        self,
        img_items: Sequence,
        transform: Optional[Callable] = None,
        attr_dict: Optional[Mapping[int, str]] = None,
        *,
        max_pixels: Optional[int] = None,
    ) -> None:
        self.img_items = [(path, np.asarray(labels, dtype=np.float32)) for path, labels in img_items]
        self.transform = transform
        if attr_dict is None:
            width = len(self.img_items[0][1]) if self.img_items else 0
            attr_dict = {i: f"attribute_{i}" for i in range(width)}
        self.attr_dict = dict(attr_dict)
        self.max_pixels = max_pixels  # decode limit (INPUT.MAX_IMAGE_PIXELS); None: PIL's default
        self.cache: Any = None

    def __getitem__(self, key: Union[int, SampleKey]) -> dict:
        index = sample_index(key)
        img_path, labels = self.img_items[index]
        img = self.load_image(index)
        if self.transform is not None:
            img = self.transform(img, torch.Generator().manual_seed(sample_seed(key)))
        return {"images": img, "targets": torch.as_tensor(labels), "img_paths": img_path}

    @property
    def num_classes(self) -> int:
        """The number of attributes (what ``MODEL.HEADS.NUM_CLASSES`` must be)."""
        return len(self.attr_dict)

    @property
    def sample_weights(self) -> torch.Tensor:
        """Each attribute's positive ratio in the set: the mean of its labels (upstream's weights
        of the weighted binary cross-entropy)."""
        weights = torch.zeros(self.num_classes, dtype=torch.float32)
        if not self.img_items:
            return weights
        for _, labels in self.img_items:
            weights += torch.as_tensor(labels)
        return weights / len(self)
