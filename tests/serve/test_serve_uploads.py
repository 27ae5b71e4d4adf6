"""fastreid.serve.uploads: a multipart body read as it arrives (refused while it is read once past
the limit, declared or not), kept in memory; an upload decoded with a pixel limit. No model needed."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator, Iterable

import pytest
from PIL import Image
from serve_testing import BOUNDARY, multipart, png_header, skip_without_serve_extra

from fastreid.serve.uploads import (
    FORM_OVERHEAD,
    UploadRejectedError,
    decode_upload,
    read_search_form,
    read_upload,
)

skip_without_serve_extra()

HEADERS = {"content-type": f"multipart/form-data; boundary={BOUNDARY}"}


class Chunks:
    """An async stream of ``data`` in ``size``-byte chunks that counts how much was pulled."""

    def __init__(self, data: bytes | Iterable[bytes], size: int = 4096) -> None:
        if isinstance(data, bytes):
            data = [data[i : i + size] for i in range(0, len(data), size)]
        self._chunks = iter(data)
        self.pulled = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            self.pulled += len(chunk)
            yield chunk


def read(body: bytes | Chunks, headers=HEADERS, max_bytes: int = 64 * 1024):
    chunks = body if isinstance(body, Chunks) else Chunks(body)
    return asyncio.run(read_search_form(headers, chunks, max_bytes))


def rejected(status: int, body: bytes | Chunks, headers=HEADERS, max_bytes: int = 64 * 1024) -> str:
    with pytest.raises(UploadRejectedError) as caught:
        read(body, headers, max_bytes)
    assert caught.value.status == status, caught.value.message
    return caught.value.message


def test_a_form_gives_its_image_and_fields_whatever_the_chunking():
    image = bytes(range(256)) * 40
    body = multipart(("k", b"7", None), ("image", image, "q.jpg"))
    for size in (1, 7, 4096, len(body)):
        form = read(Chunks(body, size))
        assert form.image == image and form.filename == "q.jpg" and form.fields == {"k": "7"}


def test_an_endless_body_is_refused_once_past_the_limit_not_after():
    def endless():
        yield f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="image"; filename="x"\r\n\r\n'.encode()
        while True:
            yield b"x" * 4096

    chunks = Chunks(endless())
    message = rejected(413, chunks, max_bytes=32 * 1024)
    assert "larger than the limit of 32 KiB" in message
    assert chunks.pulled <= 32 * 1024 + 2 * 4096 + 200  # stopped at the limit


def test_a_body_declared_too_large_is_refused_before_it_is_read():
    chunks = Chunks(multipart(("image", b"x", "x.jpg")))
    headers = {**HEADERS, "content-length": str(64 * 1024 + FORM_OVERHEAD + 1)}
    rejected(413, chunks, headers)
    assert chunks.pulled == 0
    rejected(413, Chunks(b""), {**HEADERS, "content-length": "-5"})


def test_malformed_forms_are_refused_with_their_reason():
    assert "multipart/form-data" in rejected(415, b"{}", {"content-type": "application/json"})
    rejected(415, b"", {})
    rejected(400, b"", {"content-type": "multipart/form-data"})  # no boundary
    assert "no field 'image'" in rejected(422, multipart(("k", b"3", None)))
    assert "empty" in rejected(400, multipart(("image", b"", "empty.jpg")))
    assert "not several" in rejected(400, multipart(("image", b"a", "a.jpg"), ("image", b"b", "b.jpg")))
    assert "Unexpected file" in rejected(400, multipart(("image", b"a", "a.jpg"), ("other", b"b", "b.jpg")))
    assert "longer than" in rejected(400, multipart(("k", b"1" * 5000, None), ("image", b"a", "a.jpg")))
    assert "more than" in rejected(400, multipart(*[(f"f{i}", b"1", None) for i in range(20)]))
    cut = multipart(("image", b"abc" * 1000, "a.jpg"))[:1500]
    assert "ended before the image did" in rejected(400, cut)


def test_read_upload_refuses_while_reading():
    def endless():
        while True:
            yield b"x" * 1024

    with pytest.raises(UploadRejectedError) as caught:
        read_upload(endless(), max_bytes=10 * 1024)
    assert caught.value.status == 413
    assert read_upload([b"ab", b"c"]) == b"abc"


def encoded(image: Image.Image, fmt: str) -> bytes:
    out = io.BytesIO()
    image.save(out, fmt)
    return out.getvalue()


def test_decode_upload_gives_a_tensor_or_its_status():
    good = encoded(Image.new("RGB", (32, 64), (200, 10, 10)), "JPEG")
    tensor = decode_upload(good)
    assert tuple(tensor.shape) == (3, 64, 32) and int(tensor[0].float().mean()) > 150
    with pytest.raises(UploadRejectedError) as caught:
        decode_upload(b"hello, I am text")
    assert caught.value.status == 415 and "Not a readable image" in caught.value.message
    assert "not found" not in caught.value.message and "BytesIO" not in caught.value.message
    with pytest.raises(UploadRejectedError) as caught:
        decode_upload(good[: len(good) // 2])  # a truncated JPEG
    assert caught.value.status == 415 and "truncated" in caught.value.message.lower()
    with pytest.raises(UploadRejectedError) as caught:
        decode_upload(png_header(100_000, 100_000))  # a header claiming 10 Gpixels
    assert caught.value.status == 413
    # a real decompression bomb in small: 4 Mpixels of one colour in a few KB, against a 1 Mpixel cap
    bomb = encoded(Image.new("L", (2000, 2000)), "PNG")
    assert len(bomb) < 20_000
    with pytest.raises(UploadRejectedError) as caught:
        decode_upload(bomb, max_pixels=1_000_000)
    assert caught.value.status == 413
