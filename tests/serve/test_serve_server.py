"""fastreid-serve on loopback: a real uvicorn server on 127.0.0.1 (a thread of this process). A
query that is a copy of a gallery image finds it first; every hostile upload gets its 4xx and the
server keeps answering; uploads never touch the disk; 200 searches from 8 threads."""

from __future__ import annotations

import logging
import os
import socket
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from serve_testing import BOUNDARY, MAX_BYTES, png_header, serving, skip_without_serve_extra

from fastreid.serve import create_app

skip_without_serve_extra()
httpx = pytest.importorskip("httpx", reason="the loopback tests talk HTTP with httpx")

FORM = f"multipart/form-data; boundary={BOUNDARY}"


def search(url: str, data: bytes, name: str = "q.jpg", k: str = "5", kind: str = "image/jpeg"):
    return httpx.post(f"{url}/search", files={"image": (name, data, kind)}, data={"k": k}, timeout=30)


def healthy(url: str) -> bool:
    return httpx.get(f"{url}/health", timeout=10).json()["status"] == "ok"


def gallery_files(gallery_dir) -> list:
    return sorted(gallery_dir.iterdir())


def test_a_gallery_image_finds_itself_first(live_server, gallery_dir):
    assert healthy(live_server)
    image = gallery_files(gallery_dir)[7]
    answer = search(live_server, image.read_bytes())
    assert answer.status_code == 200, answer.text
    hits = answer.json()["results"]
    assert len(hits) == 5 and hits[0]["name"] == image.name and hits[0]["distance"] < 1e-4
    thumb = httpx.get(f"{live_server}/gallery/{hits[0]['index']}", timeout=10)
    assert thumb.status_code == 200 and thumb.content[:2] == b"\xff\xd8"


def endless_form(limit: int) -> Iterator[bytes]:
    """A multipart body whose image never ends (sent chunked: no Content-Length), cut at ``limit``
    bytes in case nothing stops it."""
    yield f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="image"; filename="x.jpg"\r\n\r\n'.encode()
    sent = 0
    while sent < limit:
        sent += 64 * 1024
        yield b"\xff" * (64 * 1024)


def test_hostile_uploads_get_their_4xx_and_the_server_keeps_serving(live_server, gallery_dir):
    good = gallery_files(gallery_dir)[0].read_bytes()
    cases = {
        "not an image": (search(live_server, b"hello, I am text", "notes.txt", kind="text/plain"), 415),
        "empty file": (search(live_server, b""), 400),
        "too large (declared)": (search(live_server, os.urandom(MAX_BYTES + 1024)), 413),
        "decompression bomb": (
            search(live_server, png_header(100_000, 100_000), "bomb.png", kind="image/png"),
            413,
        ),
        "truncated JPEG": (search(live_server, good[: len(good) // 3]), 415),
        "k out of range": (search(live_server, good, k="0"), 422),
        "k not a number": (search(live_server, good, k="many"), 422),
        "no image field": (
            httpx.post(
                f"{live_server}/search",
                content=f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="k"\r\n\r\n3\r\n--{BOUNDARY}--\r\n',
                headers={"content-type": FORM},
                timeout=30,
            ),
            422,
        ),
        "another host name": (httpx.get(f"{live_server}/health", headers={"host": "evil.example"}), 400),
    }
    for case, (answer, status) in cases.items():
        assert answer.status_code == status, (case, answer.status_code, answer.text)
        assert answer.json()["detail"], case
        assert healthy(live_server), case
    assert "larger than the limit" in cases["too large (declared)"][0].json()["detail"]
    assert search(live_server, good).status_code == 200


def test_a_chunked_upload_is_cut_at_the_limit(live_server):
    # no Content-Length: refused once the body passes the limit, while it is still arriving
    # (the client may see the 413, or the connection closed under its feet)
    try:
        answer = httpx.post(
            f"{live_server}/search",
            content=endless_form(64 * MAX_BYTES),
            headers={"content-type": FORM},
            timeout=30,
        )
    except (httpx.WriteError, httpx.RemoteProtocolError, httpx.ReadError):
        pass
    else:
        assert answer.status_code == 413, answer.text
    assert healthy(live_server)


def test_a_client_that_leaves_mid_upload_is_no_server_error(live_server):
    errors: list[logging.LogRecord] = []
    handler = logging.Handler(logging.ERROR)
    handler.emit = errors.append  # type: ignore[method-assign]
    uvicorn_errors = logging.getLogger("uvicorn.error")
    uvicorn_errors.addHandler(handler)
    try:
        port = int(live_server.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(
                f"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {FORM}\r\nContent-Length: 5000\r\n\r\n"
                f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="image"; filename="x.jpg"\r\n\r\nxxxx'.encode()
            )
            time.sleep(0.3)
        time.sleep(0.3)
        assert healthy(live_server)
    finally:
        uvicorn_errors.removeHandler(handler)
    assert [r.getMessage() for r in errors] == []


def test_uploads_never_touch_the_disk(gallery, monkeypatch, tmp_path):
    # Starlette's own form parser spools uploads over 1 MB to the temporary folder; ours keeps them
    # in memory. tempfile's folder points to an empty one while 3 MB uploads go through.
    app = create_app(gallery, max_bytes=4 * 1024 * 1024)
    spool = tmp_path / "spool"
    spool.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spool))
    with serving(app) as url:
        answer = search(url, b"\xff\xd8" + os.urandom(3 * 1024 * 1024))
        assert answer.status_code == 415, answer.text  # read in full, then not decodable
        assert list(spool.iterdir()) == []


def test_a_slow_upload_times_out_and_the_server_keeps_serving(gallery):
    def trickle() -> Iterator[bytes]:
        yield f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="image"; filename="x.jpg"\r\n\r\n'.encode()
        for _ in range(40):
            time.sleep(0.1)
            yield b"\xff"

    with serving(create_app(gallery, upload_timeout=0.5)) as url:
        start = time.monotonic()
        try:
            answer = httpx.post(
                f"{url}/search", content=trickle(), headers={"content-type": FORM}, timeout=30
            )
        except (httpx.WriteError, httpx.RemoteProtocolError, httpx.ReadError):
            pass
        else:
            assert answer.status_code == 408, answer.text
            assert "took longer than 0.5 s" in answer.json()["detail"]
        assert healthy(url)
        assert time.monotonic() - start < 10


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads the RSS from /proc/self/status")
def test_200_searches_from_8_threads(live_server, gallery_dir):
    images = [(p.name, p.read_bytes()) for p in gallery_files(gallery_dir)[:8]]
    search(live_server, images[0][1])  # warm up
    before = rss_mb()
    with httpx.Client(timeout=60) as client:

        def one(i: int) -> tuple[int, str, str]:
            name, data = images[i % 8]
            r = client.post(
                f"{live_server}/search", files={"image": ("q.jpg", data, "image/jpeg")}, data={"k": "10"}
            )
            return r.status_code, name, r.json()["results"][0]["name"] if r.status_code == 200 else r.text

        start = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(one, range(200)))
        elapsed = time.perf_counter() - start
    grown = rss_mb() - before
    rate = 200 / elapsed
    print(
        f"\nfastreid-serve: 200 searches from 8 threads in {elapsed:.1f} s: {rate:.1f} requests/s, RSS {grown:+.0f} MB"
    )
    assert [status for status, _, _ in answers] == [200] * 200, [a for a in answers if a[0] != 200][:3]
    assert all(top1 == name for _, name, top1 in answers)  # each query found its own copy first
    assert grown < 200, f"the process grew by {grown:.0f} MB over 200 searches"
    assert healthy(live_server)
