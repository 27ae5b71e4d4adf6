"""``ClasDataset``: images with their class index, what the classification loaders index (upstream
FastClas's ``fastclas.dataset.ClasDataset``, with this package's image reading and per-sample seeds)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional, Union

import torch

from fastreid.data.common import ImageItems
from fastreid.data.datasets.bases import DatasetFormatError
from fastreid.data.loading.seeds import SampleKey, sample_index, sample_seed

__all__ = ["ClasDataset", "UnknownClassError"]


class UnknownClassError(DatasetFormatError):
    """An image's class is not one the model was trained on (not among the training classes)."""


class ClasDataset(ImageItems):
    """Items ``(img_path, class_name, ...)`` -> ``{"images", "targets", "img_paths"}``, ``targets``
    the class index.

    Without ``idx_to_class`` the classes are the items' class names, sorted, indexed 0..N-1 (the
    training set). With it (index -> name; the keys may be strings, as in ``idx2class.json``) the
    indices are the training set's; an item of another class is an :class:`UnknownClassError`
    naming its image, raised here rather than when the loader reaches it.

    As :class:`~fastreid.data.common.CommDataset`: ``__getitem__`` takes a :class:`SampleKey` (or a
    plain index), the image is decoded (refused beyond ``max_pixels``) or read from the decoded
    cache, and the transform gets ``torch.Generator().manual_seed(key.seed)``.
    """

    accepts_sample_keys = True

    def __init__(
        self,
        img_items: Sequence,
        transform: Optional[Callable] = None,
        idx_to_class: Optional[Mapping[Any, str]] = None,
        *,
        max_pixels: Optional[int] = None,
    ) -> None:
        self.img_items = [tuple(item) for item in img_items]
        self.transform = transform
        if idx_to_class is not None:
            self.idx_to_class = {int(i): str(name) for i, name in idx_to_class.items()}
            self.class_to_idx = {name: i for i, name in self.idx_to_class.items()}
            self.classes = sorted(self.idx_to_class.values())
        else:
            self.classes = sorted({str(item[1]) for item in self.img_items})
            self.class_to_idx = {name: i for i, name in enumerate(self.classes)}
            self.idx_to_class = {i: name for name, i in self.class_to_idx.items()}
        unknown = [item for item in self.img_items if str(item[1]) not in self.class_to_idx]
        if unknown:
            names = sorted({str(item[1]) for item in unknown})
            raise UnknownClassError(
                f"{unknown[0][0]} is of class {unknown[0][1]!r}, which is not among the {len(self.classes)} "
                f"training classes ({len(unknown)} images of {len(names)} such classes: "
                f"{', '.join(names[:5])}{' ...' if len(names) > 5 else ''}); add its images to the "
                "training set and train again, or remove them from the test set"
            )
        self.targets = [self.class_to_idx[str(item[1])] for item in self.img_items]
        self.max_pixels = max_pixels  # decode limit (INPUT.MAX_IMAGE_PIXELS); None: PIL's default
        self.cache: Any = None

    def __getitem__(self, key: Union[int, SampleKey]) -> dict:
        index = sample_index(key)
        img = self.load_image(index)
        if self.transform is not None:
            img = self.transform(img, torch.Generator().manual_seed(sample_seed(key)))
        return {"images": img, "targets": self.targets[index], "img_paths": self.img_items[index][0]}

    @property
    def num_classes(self) -> int:
        """The number of classes (what ``MODEL.HEADS.NUM_CLASSES`` must be)."""
        return len(self.classes)
