"""``CommDataset``: the re-ID dataset the loaders index (paths and labels only), on
``ImageItems``: what every dataset of image files the loaders index shares (decoding or the decoded
cache, by item index)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable, Optional, Union

import torch
from torch.utils.data import Dataset

from .data_utils import read_image_tensor
from .loading.seeds import SampleKey, sample_index, sample_seed

__all__ = ["CommDataset", "ImageItems"]


def _label_order(value):
    return (isinstance(value, str), value)


class ImageItems(Dataset):
    """``img_items`` whose first field is an image path; the image of item i decoded (refused beyond
    ``max_pixels``, see ``fastreid.data.data_utils``) or read from a decoded cache. Subclasses set
    ``img_items``, ``max_pixels`` and ``cache`` (None) and define ``__getitem__``."""

    img_items: list
    max_pixels: Optional[int]
    cache: Any

    def set_cache(self, cache: Any) -> None:
        """Read images from a :class:`~fastreid.data.cache.DecodedCache` whose row i is item i."""
        if cache is not None and cache.count != len(self.img_items):
            raise ValueError(f"decoded cache has {cache.count} images, the dataset {len(self.img_items)}")
        self.cache = cache

    def __len__(self) -> int:
        return len(self.img_items)

    def load_image(self, index: int) -> torch.Tensor:
        """The decoded RGB image ``index`` (uint8 3xHxW), from the cache when there is one."""
        if self.cache is not None:
            return self.cache.read(index)
        return read_image_tensor(self.img_items[index][0], max_pixels=self.max_pixels)


class CommDataset(ImageItems):
    """Items ``(img_path, pid, camid)`` -> ``{"images", "targets", "camids", "img_paths"}``.

    With ``relabel`` (training) pids and camids, which may be strings such as
    ``"market1501_12"``, become 0..N-1 in sorted order (``self.pids[label]`` gives the original).
    Items keep only paths and integer labels, so the dataset pickles small for spawn workers.

    ``__getitem__`` takes a :class:`SampleKey` (or a plain index): the image is decoded (refused
    beyond ``max_pixels``, see ``fastreid.data.data_utils``) or read from the decoded cache, and the transform gets ``torch.Generator().manual_seed(key.seed)``,
    the only source of its randomness.
    """

    accepts_sample_keys = True

    def __init__(
        self,
        img_items: Sequence,
        transform: Optional[Callable] = None,
        relabel: bool = True,
        cache=None,
        max_pixels: Optional[int] = None,
    ):
        items = [tuple(item[:3]) for item in img_items]
        self.pids = sorted({item[1] for item in items}, key=_label_order)
        self.cams = sorted({item[2] for item in items}, key=_label_order)
        self.relabel = relabel
        if relabel:
            pid_dict = {p: i for i, p in enumerate(self.pids)}
            cam_dict = {c: i for i, c in enumerate(self.cams)}
            items = [(path, pid_dict[pid], cam_dict[cam]) for path, pid, cam in items]
        self.img_items = items
        self.transform = transform
        self.max_pixels = max_pixels  # decode limit (INPUT.MAX_IMAGE_PIXELS); None: PIL's default
        self.cache = None
        if cache is not None:
            self.set_cache(cache)

    def __getitem__(self, key: Union[int, SampleKey]) -> dict:
        index = sample_index(key)
        img_path, pid, camid = self.img_items[index]
        img = self.load_image(index)
        if self.transform is not None:
            img = self.transform(img, torch.Generator().manual_seed(sample_seed(key)))
        return {"images": img, "targets": pid, "camids": camid, "img_paths": img_path}

    @property
    def num_classes(self) -> int:
        return len(self.pids)

    @property
    def num_cameras(self) -> int:
        return len(self.cams)
