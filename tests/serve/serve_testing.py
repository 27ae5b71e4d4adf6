"""Constants and helpers of the fastreid-serve tests (imported by name: pytest puts this folder on
sys.path)."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
import warnings
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fastreid.cli.serve import UVICORN_OPTIONS

REPO = Path(__file__).resolve().parents[2]
#: Images in the test gallery (copied from the synthetic Market-1501's gallery).
GALLERY_SIZE = 24
#: The upload limit of the test apps: small, so that the too-large cases stay small too.
MAX_BYTES = 256 * 1024
BOUNDARY = "fastreid-test-boundary"


def skip_without_serve_extra() -> None:
    """Skip the calling test module (at its top) when a package of the serve extra is missing."""
    for module in ("fastapi", "uvicorn", "python_multipart"):
        pytest.importorskip(module, reason="fastreid-serve needs the serve extra: pip install -e '.[serve]'")


def load_test_client() -> Any:
    """FastAPI's TestClient, imported without Starlette's note that it prefers httpx2 to httpx
    (the dev extra installs httpx; both work)."""
    pytest.importorskip("httpx", reason="FastAPI's TestClient needs httpx")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Using `httpx` with `starlette.testclient`")
        from fastapi.testclient import TestClient
    return TestClient


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (now)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def png_header(width: int, height: int) -> bytes:
    """The first bytes of a PNG whose header claims width x height pixels (a decompression
    bomb's shape: tiny, claiming billions of pixels)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", len(ihdr)) + chunk + struct.pack(">I", zlib.crc32(chunk))


def multipart(*parts: tuple[str, bytes, str | None]) -> bytes:
    """A multipart/form-data body (boundary ``BOUNDARY``) of ``(field name, value, file name or
    None)`` parts."""
    out = b""
    for name, value, filename in parts:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        out += f"--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n".encode()
        if filename:
            out += b"Content-Type: application/octet-stream\r\n"
        out += b"\r\n" + value + b"\r\n"
    return out + f"--{BOUNDARY}--\r\n".encode()


@contextlib.contextmanager
def serving(app: Any, **config: Any) -> Iterator[str]:
    """``app`` served by a real uvicorn server on 127.0.0.1 and a free port, run as fastreid-serve
    runs it (its uvicorn options), in a thread of this process, started within 30 s and stopped
    within 10 s; yields its URL."""
    import uvicorn  # the serve extra: the tests that use this skip without it

    port = free_port()
    options = {**UVICORN_OPTIONS, "log_level": "error", **config}
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, **options))
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        assert not thread.is_alive(), "the server did not stop"


def assert_same_answers(got: list[dict], expected: list[dict], atol: float = 1e-5) -> None:
    """Two result lists of one query agree: the same distances (within ``atol``: a batched forward
    rounds differently from a single one) and the same images, except that images whose distances
    are within ``atol`` of each other may come in either order."""
    assert len(got) == len(expected), (got, expected)
    assert np.allclose([h["distance"] for h in got], [h["distance"] for h in expected], atol=atol)

    def groups(hits: list[dict]) -> list[set]:
        out: list[set] = []
        for i, hit in enumerate(hits):
            if i and hit["distance"] - hits[i - 1]["distance"] <= atol:
                out[-1].add(hit["name"])
            else:
                out.append({hit["name"]})
        return out

    # the last group may be cut by k differently: compare only the groups both lists end after
    a, b = groups(got), groups(expected)
    assert a[:-1] == b[:-1] or a == b, (got, expected)
