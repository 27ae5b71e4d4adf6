"""An uploaded query image: bounded in size while it is read, decoded in memory with the image
reader's pixel limit. Every refusal is an :class:`UploadRejectedError` with the HTTP status to answer."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from fastreid.data.data_utils import ImageReadError, ImageTooLargeError, decode_image_bytes
from fastreid.utils.errors import UserError

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_PIXELS",
    "BoundedUpload",
    "UploadRejectedError",
    "decode_upload",
    "read_upload",
]

DEFAULT_MAX_BYTES = 10 * 1024 * 1024
DEFAULT_MAX_PIXELS = 40_000_000  # ~ a 7,000 x 5,700 photo; far beyond any person crop


class UploadRejectedError(UserError):
    """An upload the server refuses; ``status`` is the HTTP status of the answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class BoundedUpload:
    """The bytes of an upload as they arrive: refused (413) as soon as they pass ``max_bytes``,
    and (400) when there are none."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._data = bytearray()

    def add(self, chunk: bytes) -> None:
        self._data += chunk
        if len(self._data) > self.max_bytes:
            raise UploadRejectedError(
                413, f"The image is larger than the limit of {self.max_bytes // 1024} KiB"
            )

    def value(self) -> bytes:
        if not self._data:
            raise UploadRejectedError(400, "The upload is empty: send an image file in the field 'image'")
        return bytes(self._data)


def read_upload(chunks: Iterable[bytes], max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """All of ``chunks`` through a :class:`BoundedUpload`."""
    upload = BoundedUpload(max_bytes)
    for chunk in chunks:
        upload.add(chunk)
    return upload.value()


def decode_upload(raw: bytes, max_pixels: int = DEFAULT_MAX_PIXELS) -> torch.Tensor:
    """A 3 x H x W uint8 RGB tensor; a decompression bomb is 413, anything else unreadable 415."""
    try:
        return decode_image_bytes(raw, "the upload", max_pixels=max_pixels)
    except ImageTooLargeError as e:
        raise UploadRejectedError(413, str(e)) from None
    except ImageReadError as e:
        raise UploadRejectedError(415, f"Not a readable image (JPEG, PNG, WEBP, BMP, ...): {e}") from None
