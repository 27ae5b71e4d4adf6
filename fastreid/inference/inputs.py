"""What users hand to the feature extractor: image files named by folders, globs or list files,
and images already in memory (PIL, numpy, tensors)."""

from __future__ import annotations

import glob
import logging
import os
from collections.abc import Iterable, Sequence
from typing import Any, Union

import numpy as np
import torch
from PIL import Image

from fastreid.data.data_utils import read_image_tensor
from fastreid.data.transforms import hwc_array_to_tensor
from fastreid.utils.errors import UserError

__all__ = [
    "IMAGE_EXTENSIONS",
    "ImageInput",
    "NoImagesError",
    "is_path",
    "list_image_files",
    "to_image_tensor",
]

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff", ".gif")

ImageInput = Union[str, os.PathLike, Image.Image, np.ndarray, torch.Tensor]


class NoImagesError(UserError, FileNotFoundError):
    """An input folder, glob or list names no image file."""


def is_path(item: Any) -> bool:
    return isinstance(item, (str, os.PathLike))


def _images_in_folder(folder: str) -> list[str]:
    found: list[str] = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        found.extend(os.path.join(root, f) for f in sorted(files) if f.lower().endswith(IMAGE_EXTENSIONS))
    return found


def _images_in_list_file(list_file: str) -> list[str]:
    """One path per line (blank lines and ``#`` comments skipped); relative paths are taken from
    the list file's folder."""
    base = os.path.dirname(os.path.abspath(list_file))
    with open(list_file, encoding="utf-8") as f:
        lines = [line.strip() for line in f]
    return [
        line if os.path.isabs(line) else os.path.join(base, line)
        for line in lines
        if line and not line.startswith("#")
    ]


def list_image_files(specs: str | os.PathLike | Iterable[str | os.PathLike]) -> list[str]:
    """Image files, in a stable order, from each spec: a folder (walked, sorted), a glob pattern
    (sorted matches), a ``.txt`` list file (its order), or an image file. Raises
    :class:`NoImagesError` naming the spec that gives nothing."""
    if isinstance(specs, (str, os.PathLike)):
        specs = [specs]
    specs = list(specs)
    if not specs:
        raise NoImagesError("no input images given")
    files: list[str] = []
    for spec in (os.fspath(s) for s in specs):
        if os.path.isdir(spec):
            found = _images_in_folder(spec)
        elif os.path.isfile(spec) and spec.lower().endswith(".txt"):
            found = _images_in_list_file(spec)
        elif os.path.isfile(spec):
            found = [spec]
        elif glob.has_magic(spec):
            found = sorted(p for p in glob.glob(spec, recursive=True) if p.lower().endswith(IMAGE_EXTENSIONS))
        else:
            raise NoImagesError(f"input {spec!r}: no such file or folder")
        if not found:
            raise NoImagesError(f"input {spec!r} names no image file ({', '.join(IMAGE_EXTENSIONS)})")
        files.extend(found)
    return files


_warned_unit_scale = False


def _warn_unit_scale() -> None:
    global _warned_unit_scale
    _warned_unit_scale = True
    logging.getLogger(__name__).warning(
        "a float image tensor has all values <= 1: fastreid expects pixels on the 0..255 scale "
        "(multiply by 255 first)"
    )


def to_image_tensor(item: ImageInput, bgr: bool = False) -> torch.Tensor:
    """A uint8 3 x H x W RGB tensor (0..255) from a path, a PIL image, an H x W x 3 uint8 array
    (``bgr=True`` for OpenCV's channel order) or a 3 x H x W tensor on the 0..255 scale (uint8 or
    float; ``bgr`` flips its channels too)."""
    if is_path(item):
        return read_image_tensor(os.fspath(item))  # type: ignore[arg-type]  # is_path checked it
    if isinstance(item, Image.Image):
        return hwc_array_to_tensor(np.asarray(item.convert("RGB")))
    if isinstance(item, np.ndarray):
        if bgr and item.ndim == 3:
            item = item[:, :, 2::-1]
        return hwc_array_to_tensor(item)
    if isinstance(item, torch.Tensor):
        if item.dim() != 3 or item.size(0) != 3:
            raise ValueError(f"image tensors must be 3 x H x W (RGB, 0..255), got shape {tuple(item.shape)}")
        if item.is_floating_point():
            if item.numel() and float(item.max()) <= 1.0 and not _warned_unit_scale:
                _warn_unit_scale()
            item = item.round().clamp(0, 255).to(torch.uint8)
        return item.flip(0) if bgr else item
    raise TypeError(
        f"cannot read an image from a {type(item).__name__}; pass a path, a PIL image, "
        "an H x W x 3 uint8 array or a 3 x H x W tensor"
    )


def split_batch(inputs: Any) -> Sequence[ImageInput]:
    """A single image, a list of images, or a stacked batch (N x 3 x H x W tensor, N x H x W x 3
    array) as a sequence of single images."""
    if is_path(inputs) or isinstance(inputs, Image.Image):
        return [inputs]
    if isinstance(inputs, torch.Tensor):
        return list(inputs) if inputs.dim() == 4 else [inputs]
    if isinstance(inputs, np.ndarray):
        return list(inputs) if inputs.ndim == 4 else [inputs]
    return list(inputs)
