"""Image reading, the background prefetch thread and DataLoaderX (the guarded loader)."""

from __future__ import annotations

import contextlib
import logging
import os
import warnings

import numpy as np
import torch
from PIL import Image, ImageOps, UnidentifiedImageError

__all__ = ["ImageReadError", "read_image", "read_image_tensor"]

logger = logging.getLogger(__name__)

# torchvision 0.29 marks its decoders deprecated in favour of torchcodec; they remain the fastest
# JPEG path available with torchvision alone, and PIL takes over where they are missing.
warnings.filterwarnings(
    "ignore", message="The image decoding and encoding capabilities of TorchVision", category=DeprecationWarning
)


class ImageReadError(OSError, ValueError):
    """An image file is missing, unreadable or corrupt. The message names the path."""


def _open_error(path: str, exc: BaseException) -> ImageReadError:
    if isinstance(exc, FileNotFoundError) or not os.path.exists(path):
        return ImageReadError(f"image file not found: {path!r} (check the dataset root / FASTREID_DATASETS)")
    return ImageReadError(f"cannot read image {path!r}: {type(exc).__name__}: {exc} (corrupt or not an image?)")


def _pil_rgb(path: str) -> Image.Image:
    """Open ``path`` with PIL, apply EXIF orientation and return a fully decoded RGB image."""
    try:
        with open(path, "rb") as f, Image.open(f) as image:
            image.load()
            # a broken EXIF block must not make a good image unreadable
            with contextlib.suppress(Exception):
                image = ImageOps.exif_transpose(image)
            return image.convert("RGB")
    except (OSError, UnidentifiedImageError, ValueError, SyntaxError) as exc:
        raise _open_error(path, exc) from exc


def read_image(file_name: str, format: str | None = "RGB") -> Image.Image:  # noqa: A002 (upstream name)
    """Read an image as a PIL image, like upstream FastReID's ``read_image``.

    EXIF orientation is applied; grayscale, palette and RGBA images become RGB. ``format`` may be
    "RGB" (default), "BGR" (an RGB-mode image whose channels are in B, G, R order, as upstream),
    "L", or any PIL mode; ``None`` keeps the colour mode after orientation.
    """
    path = os.fspath(file_name)
    if format in ("RGB", "BGR"):
        image = _pil_rgb(path)
        if format == "BGR":
            image = Image.fromarray(np.ascontiguousarray(np.asarray(image)[:, :, ::-1]))
        return image
    try:
        with open(path, "rb") as f, Image.open(f) as image:
            image.load()
            with contextlib.suppress(Exception):
                image = ImageOps.exif_transpose(image)
            return image.convert(format) if format is not None else image.copy()
    except (OSError, UnidentifiedImageError, ValueError, SyntaxError) as exc:
        raise _open_error(path, exc) from exc


def read_image_tensor(file_name: str) -> torch.Tensor:
    """Read an image as a ``torch.uint8`` tensor 3xHxW in RGB order (the fast path).

    JPEG, PNG, WEBP and GIF are decoded by torchvision (libjpeg-turbo for JPEG) with EXIF
    orientation applied; other formats (BMP, TIFF, ...) go through PIL.
    """
    from torchvision.io import ImageReadMode, decode_image

    path = os.fspath(file_name)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise _open_error(path, exc) from exc
    if not raw:
        raise ImageReadError(f"cannot read image {path!r}: the file is empty")
    data = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
    try:
        return decode_image(data, mode=ImageReadMode.RGB, apply_exif_orientation=True)
    except (RuntimeError, ValueError):
        pass  # an unsupported format, or a corrupt file for which PIL gives the error message
    image = _pil_rgb(path)
    return torch.from_numpy(np.array(image, dtype=np.uint8)).permute(2, 0, 1).contiguous()
