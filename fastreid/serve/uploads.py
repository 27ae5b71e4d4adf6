"""An uploaded query image: the multipart body read as it arrives with python-multipart's streaming
parser, refused as soon as it passes the size limit (declared or not), kept in memory only (no
temporary file anywhere), then decoded with the image reader's pixel limit. Every refusal is an
:class:`UploadRejectedError` carrying the HTTP status to answer."""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

import torch
from PIL import UnidentifiedImageError

from fastreid.data.data_utils import ImageReadError, ImageTooLargeError, decode_image_bytes
from fastreid.utils.errors import UserError
from fastreid.utils.extras import require

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_PIXELS",
    "IMAGE_FIELD",
    "BoundedUpload",
    "ImageForm",
    "SearchForm",
    "UploadRejectedError",
    "decode_upload",
    "read_image_form",
    "read_search_form",
    "read_upload",
]

DEFAULT_MAX_BYTES = 10 * 1024 * 1024
DEFAULT_MAX_PIXELS = 40_000_000  # ~ a 7,000 x 5,700 photo; far beyond any person crop
IMAGE_FIELD = "image"
#: What a multipart body may hold besides the image: boundaries, part headers, the small fields.
FORM_OVERHEAD = 64 * 1024
MAX_FIELD_BYTES = 1024
MAX_PARTS = 8


class UploadRejectedError(UserError):
    """An upload the server refuses; ``status`` is the HTTP status of the answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _kib(n: int) -> str:
    return f"{n / 1024 / 1024:g} MB" if n >= 1024 * 1024 else f"{n // 1024} KiB"


class BoundedUpload:
    """The bytes of an upload as they arrive: refused (413) as soon as they pass ``max_bytes``,
    and (400) when there are none."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._data = bytearray()

    def add(self, chunk: bytes) -> None:
        if len(self._data) + len(chunk) > self.max_bytes:
            raise UploadRejectedError(413, f"The image is larger than the limit of {_kib(self.max_bytes)}")
        self._data += chunk

    def __len__(self) -> int:
        return len(self._data)

    def value(self) -> bytes:
        if not self._data:
            raise UploadRejectedError(
                400, f"The upload is empty: send an image file in the field '{IMAGE_FIELD}'"
            )
        return bytes(self._data)


def read_upload(chunks: Iterable[bytes], max_bytes: int = DEFAULT_MAX_BYTES) -> bytes:
    """All of ``chunks`` through a :class:`BoundedUpload`."""
    upload = BoundedUpload(max_bytes)
    for chunk in chunks:
        upload.add(chunk)
    return upload.value()


@dataclass
class SearchForm:
    """What a search request sent: the image's bytes and file name, and its small text fields."""

    image: bytes
    filename: str = ""
    fields: dict[str, str] = field(default_factory=dict)


@dataclass
class ImageForm:
    """What a form of images sent: each image's ``(file name, bytes)``, in order, and the small
    text fields."""

    images: list[tuple[str, bytes]]
    fields: dict[str, str] = field(default_factory=dict)


class _FormCollector:
    """python-multipart's callbacks for one request: each ``image`` file part (at most
    ``max_images``) into a :class:`BoundedUpload`, each other field into a string of at most
    ``MAX_FIELD_BYTES``."""

    def __init__(
        self,
        max_bytes: int,
        parse_options_header: Callable[[bytes], tuple[bytes, dict]],
        max_images: int = 1,
    ) -> None:
        self.max_bytes = max_bytes
        self.max_images = max_images
        self._parse_options_header = parse_options_header
        self.images: list[tuple[str, BoundedUpload]] = []
        self.fields: dict[str, str] = {}
        #: inside an image part (its headers read, its end not yet): a body that ends here is cut off
        self.in_image = False
        self._parts = 0
        self._header_name = bytearray()
        self._header_value = bytearray()
        self._disposition = b""
        self._name = ""
        self._is_file = False
        self._value = bytearray()

    def callbacks(self) -> Any:  # python-multipart's MultipartCallbacks (a TypedDict)
        return {
            "on_part_begin": self.on_part_begin,
            "on_header_field": lambda data, start, end: self._header_name.extend(data[start:end]),
            "on_header_value": lambda data, start, end: self._header_value.extend(data[start:end]),
            "on_header_end": self.on_header_end,
            "on_headers_finished": self.on_headers_finished,
            "on_part_data": self.on_part_data,
            "on_part_end": self.on_part_end,
        }

    def on_part_begin(self) -> None:
        self._parts += 1
        if self._parts > MAX_PARTS + self.max_images:
            raise UploadRejectedError(400, f"The form has more than {MAX_PARTS + self.max_images} parts")
        self._disposition, self._name, self._is_file = b"", "", False
        self._value = bytearray()

    def on_header_end(self) -> None:
        if bytes(self._header_name).strip().lower() == b"content-disposition":
            self._disposition = bytes(self._header_value)
        self._header_name.clear()
        self._header_value.clear()

    def on_headers_finished(self) -> None:
        _, options = self._parse_options_header(self._disposition)
        if b"name" not in options:
            raise UploadRejectedError(
                400, "A form part has no name (Content-Disposition: form-data; name=...)"
            )
        self._name = options[b"name"].decode("utf-8", "replace")
        self._is_file = b"filename" in options
        if self._name == IMAGE_FIELD:
            if len(self.images) == self.max_images:
                raise UploadRejectedError(
                    400,
                    f"Send one file in the field '{IMAGE_FIELD}', not several"
                    if self.max_images == 1
                    else f"Send at most {self.max_images} files in the field '{IMAGE_FIELD}'",
                )
            filename = options.get(b"filename", b"").decode("utf-8", "replace")
            self.images.append((filename, BoundedUpload(self.max_bytes)))
            self.in_image = True
        elif self._is_file:
            raise UploadRejectedError(
                400,
                f"Unexpected file in the field {self._name!r}: send the image in the field '{IMAGE_FIELD}'",
            )

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        if self._name == IMAGE_FIELD:
            self.images[-1][1].add(data[start:end])
            return
        self._value.extend(data[start:end])
        if len(self._value) > MAX_FIELD_BYTES:
            raise UploadRejectedError(
                400, f"The form field {self._name!r} is longer than {MAX_FIELD_BYTES} bytes"
            )

    def on_part_end(self) -> None:
        if self._name == IMAGE_FIELD:
            self.in_image = False
        elif self._name:
            self.fields[self._name] = self._value.decode("utf-8", "replace")


async def read_image_form(
    headers: Mapping[str, str],
    chunks: AsyncIterable[bytes],
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_images: int = 1,
) -> ImageForm:
    """The ``multipart/form-data`` body ``chunks`` (with the request's ``headers``) read as it
    arrives, with 1 to ``max_images`` images of at most ``max_bytes`` each: a body declared larger
    than that plus the form's overhead is refused before any of it is read, and any body (chunked
    too) as soon as it passes that size; the images stay in memory. 415 for another content type,
    400 for a malformed or cut-off form, 422 when the ``image`` field is missing."""
    require("python_multipart", "fastreid-serve's uploads (python-multipart)", "serve")
    # the serve extra (optional): imported once it is known to be there
    from python_multipart import MultipartParser
    from python_multipart.exceptions import FormParserError  # the 'serve' extra, as above
    from python_multipart.multipart import parse_options_header  # the 'serve' extra

    content_type = headers.get("content-type", "")
    mime, options = parse_options_header(content_type)
    if mime != b"multipart/form-data":
        raise UploadRejectedError(
            415,
            f"Send the image as multipart/form-data in the field '{IMAGE_FIELD}' "
            f"(got Content-Type {content_type or 'none'!r})",
        )
    if not options.get(b"boundary"):
        raise UploadRejectedError(400, "The multipart Content-Type has no boundary")
    limit = max_images * max_bytes + FORM_OVERHEAD
    declared = headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise UploadRejectedError(
            413, f"The request is larger than the limit of {_kib(limit - FORM_OVERHEAD)}"
        )

    collector = _FormCollector(max_bytes, parse_options_header, max_images)
    try:
        parser = MultipartParser(options[b"boundary"], collector.callbacks())
    except FormParserError as e:
        raise UploadRejectedError(400, f"Malformed multipart form: {e}") from None
    received = 0
    async for chunk in chunks:
        received += len(chunk)
        if received > limit:
            raise UploadRejectedError(
                413, f"The request is larger than the limit of {_kib(limit - FORM_OVERHEAD)}"
            )
        try:
            parser.write(chunk)
        except FormParserError as e:
            raise UploadRejectedError(400, f"Malformed multipart form: {e}") from None
    parser.finalize()
    if not collector.images:
        raise UploadRejectedError(422, f"The form has no field '{IMAGE_FIELD}': send an image file in it")
    if collector.in_image:
        raise UploadRejectedError(400, "The upload ended before the image did (a cut-off request)")
    return ImageForm([(name, upload.value()) for name, upload in collector.images], collector.fields)


async def read_search_form(
    headers: Mapping[str, str], chunks: AsyncIterable[bytes], max_bytes: int = DEFAULT_MAX_BYTES
) -> SearchForm:
    """:func:`read_image_form` of a search: exactly one image."""
    form = await read_image_form(headers, chunks, max_bytes, max_images=1)
    ((filename, image),) = form.images
    return SearchForm(image, filename, form.fields)


def decode_upload(raw: bytes, max_pixels: Optional[int] = DEFAULT_MAX_PIXELS) -> torch.Tensor:
    """A 3 x H x W uint8 RGB tensor; a decompression bomb is 413, anything else unreadable 415."""
    try:
        return decode_image_bytes(raw, "the upload", max_pixels=max_pixels)
    except ImageTooLargeError as e:
        raise UploadRejectedError(413, str(e)) from None
    except ImageReadError as e:
        raise UploadRejectedError(415, f"Not a readable image: {_why_unreadable(e)}") from None


def _why_unreadable(error: ImageReadError) -> str:
    """What the user can act on: PIL's reason (e.g. "image file is truncated"), not the reader's
    wording for files on disk nor the repr of the in-memory buffer."""
    cause = error.__cause__
    if isinstance(cause, UnidentifiedImageError):
        return "not a known image format (JPEG, PNG, WEBP, BMP, GIF, TIFF, ...)"
    return str(cause) if cause is not None else str(error)
