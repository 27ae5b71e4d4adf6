"""fastreid-serve under load, on loopback (a real uvicorn server, run as the command runs it):
searches past the queue are refused with 503, Retry-After and the JSON detail; stalled uploads are
dropped with 408 and give their place up; the page and /health answer with 200 stalled uploads
open; and 200 requests at concurrency 32, hostile ones among them."""

from __future__ import annotations

import asyncio
import os
import select
import socket
import threading
import time

import pytest
from serve_testing import BOUNDARY, multipart, png_header, serving, skip_without_serve_extra

from fastreid.serve import create_app

skip_without_serve_extra()
httpx = pytest.importorskip("httpx", reason="the loopback tests talk HTTP with httpx")

FORM = f"multipart/form-data; boundary={BOUNDARY}"
IMAGE_PART = f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="image"; filename="x.jpg"\r\n\r\n'


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def stall(port: int) -> socket.socket:
    """A search whose upload stops after the first bytes of its image (the socket stays open)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(
        f"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {FORM}\r\nContent-Length: 5000\r\n\r\n"
        f"{IMAGE_PART}\xff\xd8".encode("latin-1")
    )
    return s


def answer_of(s: socket.socket, timeout: float) -> tuple[int, dict[str, str], str]:
    """The status, headers and body the server sent on ``s`` (within ``timeout``)."""
    s.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    length = int(headers.get("content-length", 0))
    while len(body) < length:
        chunk = s.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, body.decode()


def search(url: str, data: bytes, timeout: float = 30) -> httpx.Response:
    return httpx.post(f"{url}/search", files={"image": ("q.jpg", data, "image/jpeg")}, timeout=timeout)


def answered(s: socket.socket) -> bool:
    return bool(select.select([s], [], [], 0)[0])


def test_stalled_uploads_are_dropped_and_nothing_else_waits_behind_them(gallery, gallery_dir):
    # The default limits (16 uploads read at once, 128 waiting): of 200 uploads that stall after
    # their first bytes, 144 are taken in, the others refused at once. Meanwhile (144 connections
    # open: more than an HTTP server's own connection limit would allow) a search is refused with
    # Retry-After and the page and /health answer within 1 s (the promise, not a speed claim: they
    # take no place and no thread); the first stalled uploads are dropped after 3 s without
    # progress with 408; once the clients go away, searches are answered again.
    # The checks wait until the server holds all 144 (it takes connections in as its event loop
    # gets to them), then must be done before the first 16 are dropped and free their places: the
    # idle timeout is 3 s, not 1, for a machine busy with other tests (at 1 s a search was once
    # answered there).
    app = create_app(gallery, idle_timeout=3.0)
    searches = app.state.admissions["search"]
    good = sorted(gallery_dir.iterdir())[3]
    with serving(app) as url:
        sockets = [stall(port_of(url)) for _ in range(200)]
        try:
            deadline = time.monotonic() + 30
            while searches.active < searches.capacity and time.monotonic() < deadline:
                time.sleep(0.01)
            assert searches.active == searches.capacity == 144, searches.active
            busy = search(url, good.read_bytes())
            assert busy.status_code == 503, busy.text
            assert int(busy.headers["retry-after"]) >= 1
            assert "busy" in busy.json()["detail"] and "\n" not in busy.json()["detail"]
            for path in ("/health", "/"):
                assert httpx.get(f"{url}{path}", timeout=1.0).status_code == 200, path
            refused = [s for s in sockets[144:] if answered(s)]
            assert len(refused) > 20  # (fewer than 56 where places freed before all 200 had come)
            for s in refused:
                status, headers, body = answer_of(s, timeout=10)
                assert status == 503 and "retry-after" in headers and '"detail"' in body, (status, body)
            for s in sockets[:16]:
                status, _, body = answer_of(s, timeout=30)
                assert status == 408 and "sent nothing for 3 s" in body, (status, body)
        finally:
            for s in sockets:
                s.close()
        answer = search(url, good.read_bytes())
        assert answer.status_code == 200 and answer.json()["results"][0]["name"] == good.name
    assert app.state.admissions["search"].active == 0


def test_a_slow_but_steady_upload_is_not_an_idle_one(gallery, gallery_dir):
    data = sorted(gallery_dir.iterdir())[5].read_bytes()
    body = f"{IMAGE_PART}".encode() + data + f"\r\n--{BOUNDARY}--\r\n".encode()

    def trickle():
        for i in range(0, len(body), len(body) // 6 + 1):
            time.sleep(0.3)  # each pause below the idle timeout, all of them above it
            yield body[i : i + len(body) // 6 + 1]

    with serving(create_app(gallery, idle_timeout=1.0)) as url:
        answer = httpx.post(f"{url}/search", content=trickle(), headers={"content-type": FORM}, timeout=30)
        assert answer.status_code == 200, answer.text


async def load(url: str, jobs: list[tuple[str, object]], concurrency: int) -> list[tuple]:
    """Run ``jobs`` (kind, payload) ``concurrency`` at a time; ``(kind, status or exception name,
    top-1 name or detail, payload)`` of each."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    queue: asyncio.Queue = asyncio.Queue()
    for job in jobs:
        queue.put_nowait(job)
    out: list[tuple] = []
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:

        async def worker() -> None:
            while not queue.empty():
                kind, payload = queue.get_nowait()
                try:
                    if kind == "no image field":
                        r = await client.post(
                            "/search", content=multipart(("k", b"3", None)), headers={"content-type": FORM}
                        )
                    else:
                        name, data, k = payload  # type: ignore[misc]
                        r = await client.post(
                            "/search", files={"image": (name, data, "image/jpeg")}, data={"k": k}
                        )
                except (httpx.WriteError, httpx.ReadError, httpx.RemoteProtocolError) as e:
                    out.append((kind, type(e).__name__, None, payload))  # a body cut off while it was sent
                    continue
                body = r.json()
                top = body["results"][0]["name"] if r.status_code == 200 else body["detail"]
                out.append((kind, r.status_code, top, payload))

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return out


@pytest.mark.slow
def test_200_requests_at_concurrency_32_with_hostile_ones(gallery, gallery_dir):
    # 160 valid searches and 40 hostile requests, 32 at a time, 8 uploads stalled meanwhile, and
    # /health polled throughout: every valid search finds its own image first, every hostile one gets
    # its 4xx, nothing gets a 5xx. (The idle timeout is 15 s, not 1: this process's own client,
    # sharing the interpreter with the server, can pause for seconds on a loaded machine; at 5 s a
    # valid upload was once cut with a 408 in make test's 3 workers on 2 cores.) ~15 s, the stalled
    # uploads' wait; the 160 searches take ~5 s on a quiet 2-core machine, ~17 s at load 12.
    files = sorted(gallery_dir.iterdir())
    images = [(p.name, p.read_bytes()) for p in files[:12]]
    good = images[0][1]
    hostile = {
        "not an image": (("notes.txt", b"hello, I am text", "5"), 415),
        "truncated": (("cut.jpg", good[: len(good) // 3], "5"), 415),
        "bomb": (("bomb.png", png_header(100_000, 100_000), "5"), 413),
        "too large": (("big.jpg", b"\xff\xd8" + os.urandom(300 * 1024), "5"), 413),
        "bad k": (("q.jpg", good, "0"), 422),
        "no image field": (None, 422),
    }
    jobs: list[tuple[str, object]] = [("valid", (*images[i % 12], "5")) for i in range(160)]
    for i in range(40):
        kind = list(hostile)[i % len(hostile)]
        jobs.insert(4 * i + 2, (kind, hostile[kind][0]))
    app = create_app(gallery, max_bytes=256 * 1024, idle_timeout=15.0, allowed_hosts=["127.0.0.1"])
    health: list[int] = []
    with serving(app) as url:
        done = threading.Event()

        def poll() -> None:
            with httpx.Client(timeout=10) as client:
                while not done.is_set():
                    health.append(client.get(f"{url}/health").status_code)
                    time.sleep(0.05)

        poller = threading.Thread(target=poll)
        poller.start()
        stalled = [stall(port_of(url)) for _ in range(8)]
        try:
            results = asyncio.run(load(url, jobs, concurrency=32))
            stalled_answers = [answer_of(s, timeout=30) for s in stalled]
        finally:
            done.set()
            poller.join(30)
            for s in stalled:
                s.close()
    assert len(results) == 200
    assert not [r for r in results if isinstance(r[1], int) and r[1] >= 500], "a server error"
    valid = [r for r in results if r[0] == "valid"]
    assert len(valid) == 160 and all(r[1] == 200 for r in valid), [r[:3] for r in valid if r[1] != 200][:3]
    assert all(top == payload[0] for _, _, top, payload in valid)  # each found its own image first
    for kind, status, detail, _ in results:
        if kind == "valid":
            continue
        expected = hostile[kind][1]
        # a body refused while it is still being sent may reach the client as a cut connection
        assert status == expected or (kind == "too large" and isinstance(status, str)), (kind, status, detail)
    assert [status for status, _, _ in stalled_answers] == [408] * 8
    assert health and all(status == 200 for status in health), health
    assert max(app.state.batcher.batch_sizes) > 1  # searches that arrived together shared a forward
