"""Reading images: upstream's ``read_image`` (a PIL image) and the fast ``read_image_tensor``.

Every decode path checks the image's width x height from its header before decoding, against a
pixel limit (default: PIL's ``Image.MAX_IMAGE_PIXELS``, about 89 million pixels; config key
``INPUT.MAX_IMAGE_PIXELS``, 0 = no limit). A small file claiming 20000x20000 pixels (a
"decompression bomb") is refused without allocating its pixels.
"""

from __future__ import annotations

import contextlib
import io
import os
import struct
import warnings
from typing import BinaryIO

import numpy as np
import torch
from PIL import Image, ImageOps, UnidentifiedImageError

# imported here, not at the first read: importing torchvision takes seconds, and a first read that
# includes it could exceed DATALOADER.TIMEOUT in a loader thread
from torchvision.io import ImageReadMode, decode_image

from fastreid.utils.errors import UserError

__all__ = [
    "DEFAULT_MAX_IMAGE_PIXELS",
    "ImageReadError",
    "ImageTooLargeError",
    "read_image",
    "read_image_tensor",
]

# torchvision 0.29 marks its decoders deprecated in favour of torchcodec; they remain the fastest
# JPEG path available with torchvision alone, and PIL takes over where they are missing.
warnings.filterwarnings(
    "ignore",
    message="The image decoding and encoding capabilities of TorchVision",
    category=DeprecationWarning,
)

#: PIL's own default limit (the value at import time, before any user change).
DEFAULT_MAX_IMAGE_PIXELS: int = int(Image.MAX_IMAGE_PIXELS or 89_478_485)

_READ_ERRORS = (OSError, UnidentifiedImageError, ValueError, SyntaxError, Image.DecompressionBombError)


class ImageReadError(UserError, OSError, ValueError):
    """An image file is missing, unreadable or corrupt. The message names the path."""


class ImageTooLargeError(ImageReadError):
    """An image's header claims more pixels than the limit allows (a decompression bomb?)."""


def _open_error(path: str, exc: BaseException) -> ImageReadError:
    if isinstance(exc, FileNotFoundError) or not os.path.exists(path):
        return ImageReadError(f"image file not found: {path!r} (check the dataset root / FASTREID_DATASETS)")
    if isinstance(exc, Image.DecompressionBombError):
        return ImageTooLargeError(
            f"cannot read image {path!r}: {exc} (PIL's own limit, PIL.Image.MAX_IMAGE_PIXELS; raise it too)"
        )
    return ImageReadError(
        f"cannot read image {path!r}: {type(exc).__name__}: {exc} (corrupt or not an image?)"
    )


def _limit(max_pixels: int | None) -> int:
    if max_pixels is None:
        return DEFAULT_MAX_IMAGE_PIXELS
    if int(max_pixels) < 0:
        raise ValueError(
            f"INPUT.MAX_IMAGE_PIXELS: expected a pixel count >= 0 (0 = no limit), got {max_pixels}"
        )
    return int(max_pixels)


def _check_size(path: str, image: Image.Image, max_pixels: int) -> None:
    """Refuse ``image`` (opened lazily: only its header is read) when it is too large."""
    width, height = image.size
    if max_pixels > 0 and width * height > max_pixels:
        _refuse(path, width, height, max_pixels)


def _refuse(path: str, width: int, height: int, max_pixels: int) -> None:
    raise ImageTooLargeError(
        f"image {path!r} is {width}x{height} = {width * height:,} pixels, more than the limit of "
        f"{max_pixels:,} (a decompression bomb?); raise INPUT.MAX_IMAGE_PIXELS (0 = no limit) to read it"
    )


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# start-of-frame markers (baseline, progressive, lossless, arithmetic): they carry the image size
_JPEG_SOF = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})
_JPEG_NO_LENGTH = frozenset({0x01, *range(0xD0, 0xD9)})


def _jpeg_size(raw: bytes) -> tuple[int, int] | None:
    """(width, height) from the first start-of-frame segment; None when the markers do not parse."""
    i, n = 2, len(raw)
    while i + 4 <= n:
        if raw[i] != 0xFF:
            return None
        marker = raw[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in _JPEG_NO_LENGTH:
            i += 2
            continue
        if marker in _JPEG_SOF:
            if i + 9 > n:
                return None
            height, width = struct.unpack_from(">HH", raw, i + 5)
            return width, height
        i += 2 + struct.unpack_from(">H", raw, i + 2)[0]
    return None


def _fast_header(raw: bytes) -> tuple[str, int, int] | None:
    """(format, width, height) of a PNG or JPEG read from its first bytes without PIL (whose JPEG
    header parsing costs about half a decode); None for other formats or unparsable headers."""
    if raw.startswith(_PNG_SIGNATURE) and raw[12:16] == b"IHDR" and len(raw) >= 24:
        width, height = struct.unpack_from(">II", raw, 16)
        return "PNG", width, height
    if raw.startswith(b"\xff\xd8"):
        size = _jpeg_size(raw)
        if size is not None:
            return "JPEG", *size
    return None


def _claimed_size(source: BinaryIO) -> tuple[int, int] | None:
    """The size in an image header, read by PIL's format plugins directly (``Image.open`` refuses
    to return images beyond twice PIL's limit, so their size is read here for the message)."""
    Image.init()
    source.seek(0)
    prefix = source.read(16)
    for name in Image.ID:
        factory, accept = Image.OPEN[name]
        if accept is not None and not accept(prefix):
            continue
        source.seek(0)
        try:
            return factory(source, "").size
        except Exception:  # not this format; PIL's own open tries the next plugin the same way
            continue
    return None


@contextlib.contextmanager
def _opened(source: BinaryIO, path: str, max_pixels: int):
    """PIL's lazy open (header only), size-checked. PIL's warning for images between its limit
    and twice its limit is silenced: the check above is the one that applies."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            image = Image.open(source)
    except Image.DecompressionBombError:
        size = _claimed_size(source)
        if size is None or max_pixels <= 0 or size[0] * size[1] <= max_pixels:
            raise
        _refuse(path, *size, max_pixels)
    try:
        _check_size(path, image, max_pixels)
        yield image
    finally:
        image.close()


def _pil_decode(path: str, mode: str | None, max_pixels: int) -> Image.Image:
    """Decode ``path`` with PIL after the size check; EXIF orientation applied; ``mode`` None keeps
    the colour mode."""
    try:
        with open(path, "rb") as f, _opened(f, path, max_pixels) as image:
            image.load()
            # a broken EXIF block must not make a good image unreadable
            with contextlib.suppress(Exception):
                image = ImageOps.exif_transpose(image)
            return image.convert(mode) if mode is not None else image.copy()
    except ImageReadError:
        raise
    except _READ_ERRORS as exc:
        raise _open_error(path, exc) from exc


def read_image(file_name: str, format: str | None = "RGB", *, max_pixels: int | None = None) -> Image.Image:
    """Read an image as a PIL image, like upstream FastReID's ``read_image``.

    EXIF orientation is applied; grayscale, palette and RGBA images become RGB. ``format`` may be
    "RGB" (default), "BGR" (an RGB-mode image whose channels are in B, G, R order, as upstream),
    "L", or any PIL mode; ``None`` keeps the colour mode after orientation. ``max_pixels``: the
    pixel limit (None: PIL's default; 0: no limit).
    """
    path = os.fspath(file_name)
    if format in ("RGB", "BGR"):
        image = _pil_decode(path, "RGB", _limit(max_pixels))
        if format == "BGR":
            image = Image.fromarray(np.ascontiguousarray(np.asarray(image)[:, :, ::-1]))
        return image
    return _pil_decode(path, format, _limit(max_pixels))


def read_image_tensor(file_name: str, *, max_pixels: int | None = None) -> torch.Tensor:
    """Read an image as a ``torch.uint8`` tensor 3xHxW in RGB order (the fast path).

    The size is checked from the header first (``max_pixels``: None is PIL's default, 0 no
    limit; PNG and JPEG headers are read here, other formats' by PIL). JPEG, PNG, WEBP and GIF are then decoded by torchvision (libjpeg-turbo for JPEG) with
    EXIF orientation applied; other formats (BMP, TIFF, ...) go through PIL.
    """
    path = os.fspath(file_name)
    limit = _limit(max_pixels)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise _open_error(path, exc) from exc
    if not raw:
        raise ImageReadError(f"cannot read image {path!r}: the file is empty")
    header = _fast_header(raw)
    if header is not None:
        _, width, height = header
        if limit > 0 and width * height > limit:
            _refuse(path, width, height, limit)
        fast = True
    else:
        try:
            with _opened(io.BytesIO(raw), path, limit) as image:
                fast = image.format in ("WEBP", "GIF")
        except ImageReadError:
            raise
        except _READ_ERRORS as exc:
            raise _open_error(path, exc) from exc
    if fast:
        data = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
        try:
            return decode_image(data, mode=ImageReadMode.RGB, apply_exif_orientation=True)
        except (RuntimeError, ValueError):
            pass  # a corrupt file, for which PIL gives the error message
    image = _pil_decode(path, "RGB", limit)
    return torch.from_numpy(np.array(image, dtype=np.uint8)).permute(2, 0, 1).contiguous()
