"""Constants and helpers of the fastreid-serve tests (imported by name: pytest puts this folder on
sys.path)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import struct
import subprocess
import sys
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


class Command:
    """A running ``fastreid-serve`` process: ``process``, ``url``, and ``out``: the lines it has
    printed (read by a thread as they come)."""

    def __init__(self, process: subprocess.Popen, url: str) -> None:
        self.process = process
        self.url = url
        self.out: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.out.append(line)

    def stop(self, sig: int, timeout: float = 60) -> tuple[int, str, str]:
        """Send ``sig`` and wait: ``(exit code, everything printed, stderr)``."""
        self.process.send_signal(sig)
        _, err = self.process.communicate(timeout=timeout)
        self._reader.join(10)
        return self.process.returncode, "".join(self.out), err


@contextlib.contextmanager
def command(*args: str, limit: float = 120, new_session: bool = False) -> Iterator[Command]:
    """``python -m fastreid.cli.serve ARGS --port FREE`` in a process of its own (this checkout on
    its PYTHONPATH), yielded once it has printed its address and its /health answers 200 (within
    ``limit`` s). Killed at the end if it still runs (with its process group when it has one of its
    own, ``new_session``: Ray's processes)."""
    import httpx  # the tests that use this skip without it

    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "RAY_USAGE_STATS_ENABLED": "0"}  # fmt: skip
    argv = [sys.executable, "-m", "fastreid.cli.serve", *args, "--port", str(port)]
    process = subprocess.Popen(
        argv,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=new_session,
    )
    running = Command(process, f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + limit
        while True:
            if process.poll() is not None:
                _, err = process.communicate()
                pytest.fail(f"fastreid-serve exited with {process.returncode}: {err[-2000:]}")
            assert time.monotonic() < deadline, f"fastreid-serve did not answer within {limit} s"
            time.sleep(0.2)
            if not any(line.startswith("Search page:") for line in running.out):
                continue
            try:
                health = httpx.get(f"{running.url}/health", timeout=5)
            except httpx.TransportError:
                continue
            assert health.status_code < 500, (
                health.text
            )  # (Ray's proxy answers 404 until the app is deployed)
            if health.status_code == 200:
                break
        yield running
    finally:
        if process.poll() is None:
            if new_session:
                os.killpg(process.pid, signal.SIGKILL)
            else:
                process.kill()
            process.communicate()
