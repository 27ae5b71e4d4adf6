"""fastreid-serve on loopback: a real uvicorn server on 127.0.0.1 (bounded in time, stopped at the
end) over a gallery of the synthetic Market-1501 and the tiny model. A query that is a copy of a
gallery image finds it first; every hostile upload gets its 4xx and the server keeps answering; 200
searches from 8 threads; the page in headless Chromium."""

from __future__ import annotations

import io
import os
import shutil
import socket
import struct
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("fastapi", reason="fastreid-serve needs the serve extra")
pytest.importorskip("uvicorn", reason="fastreid-serve needs the serve extra")
httpx = pytest.importorskip("httpx")

MAX_BYTES = 256 * 1024


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def gallery_dir(synthetic_market_root, tmp_path_factory):
    source = os.path.join(synthetic_market_root, "Market-1501-v15.09.15", "bounding_box_test")
    folder = tmp_path_factory.mktemp("gallery")
    for name in sorted(os.listdir(source))[:40]:  # a few dozen images
        shutil.copy(os.path.join(source, name), folder / name)
    return folder


@pytest.fixture(scope="module")
def server(tiny_model_files, gallery_dir):
    import uvicorn

    from fastreid.inference import FeatureExtractor
    from fastreid.serve import Gallery, create_app

    config_file, weights = tiny_model_files
    gallery = Gallery.build(FeatureExtractor(config_file, weights, device="cpu"), folder=str(gallery_dir))
    port = _free_port()
    config = uvicorn.Config(
        create_app(gallery, max_bytes=MAX_BYTES), host="127.0.0.1", port=port, log_level="error"
    )
    uv = uvicorn.Server(config)
    thread = threading.Thread(target=uv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not uv.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}", gallery
    finally:
        uv.should_exit = True
        thread.join(timeout=10)
        assert not thread.is_alive(), "the server did not stop"


def _search(url, data: bytes, name="q.jpg", k="5", kind="image/jpeg"):
    return httpx.post(f"{url}/search", files={"image": (name, data, kind)}, data={"k": k}, timeout=30)


def test_a_gallery_image_finds_itself_first(server, gallery_dir):
    url, gallery = server
    assert httpx.get(f"{url}/health", timeout=10).json() == {
        "status": "ok", "gallery": len(os.listdir(gallery_dir)), "max_k": 100, "max_bytes": MAX_BYTES,
    }  # fmt: skip
    name = sorted(os.listdir(gallery_dir))[7]
    answer = _search(url, (gallery_dir / name).read_bytes())
    assert answer.status_code == 200, answer.text
    hits = answer.json()["results"]
    assert len(hits) == 5 and hits[0]["name"] == name and hits[0]["distance"] < 1e-4
    assert [h["rank"] for h in hits] == [1, 2, 3, 4, 5]
    assert hits[0]["pid"] == int(name.split("_")[0])
    thumb = httpx.get(f"{url}/gallery/{hits[0]['index']}", timeout=10)
    assert thumb.status_code == 200 and thumb.content[:2] == b"\xff\xd8"


def _png_header(width: int, height: int) -> bytes:
    """A PNG whose header claims width x height pixels (a decompression bomb's shape)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", len(ihdr)) + chunk + struct.pack(">I", zlib.crc32(chunk))


def test_hostile_uploads_get_their_4xx_and_the_server_keeps_serving(server, gallery_dir):
    url, _ = server
    good = (gallery_dir / sorted(os.listdir(gallery_dir))[0]).read_bytes()
    cases = {
        "not an image": (_search(url, b"hello, I am text", "notes.txt", kind="text/plain"), 415),
        "empty": (_search(url, b""), 400),
        "too big": (_search(url, os.urandom(MAX_BYTES + 1024)), 413),
        "decompression bomb": (
            _search(url, _png_header(100_000, 100_000), "bomb.png", kind="image/png"),
            413,
        ),
        "truncated JPEG": (_search(url, good[: len(good) // 3]), 415),
        "k out of range": (_search(url, good, k="0"), 422),
        "k not a number": (_search(url, good, k="many"), 422),
        "no image field": (httpx.post(f"{url}/search", data={"k": "3"}, timeout=30), 422),
    }
    for case, (answer, status) in cases.items():
        assert answer.status_code == status, (case, answer.status_code, answer.text)
        assert answer.json()["detail"], case
    assert "larger than the limit" in cases["too big"][0].json()["detail"]
    assert httpx.get(f"{url}/gallery/999", timeout=10).status_code == 404
    assert httpx.get(f"{url}/gallery/..%2F..%2Fetc%2Fpasswd", timeout=10).status_code in (404, 422)
    assert httpx.get(f"{url}/health", timeout=10).json()["status"] == "ok"
    assert _search(url, good).status_code == 200


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads the RSS from /proc")
def test_200_searches_from_8_threads(server, gallery_dir):
    url, _ = server
    images = [(gallery_dir / n).read_bytes() for n in sorted(os.listdir(gallery_dir))[:8]]
    _search(url, images[0])  # warm up
    before = _rss_mb()
    with httpx.Client(timeout=60) as client:

        def one(i: int) -> int:
            r = client.post(
                f"{url}/search", files={"image": ("q.jpg", images[i % 8], "image/jpeg")}, data={"k": "10"}
            )
            return r.status_code

        start = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            codes = list(pool.map(one, range(200)))
        elapsed = time.perf_counter() - start
    grown = _rss_mb() - before
    print(f"\nfastreid-serve: 200 searches from 8 threads in {elapsed:.1f} s: {200 / elapsed:.1f} requests/s, "
          f"RSS {grown:+.0f} MB")  # fmt: skip
    assert codes == [200] * 200
    assert grown < 200, f"the process grew by {grown:.0f} MB over 200 searches"


CHROMIUM = "/usr/bin/chromium"


@pytest.mark.slow
@pytest.mark.skipif(
    not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM} (apt-get install chromium)"
)
def test_the_page_in_a_real_browser(server, gallery_dir, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    url, _ = server
    name = sorted(os.listdir(gallery_dir))[3]
    text_file = tmp_path / "notes.txt"
    text_file.write_text("not an image")
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(url + "/", timeout=20_000)
            assert page.inner_text("#size") == str(len(os.listdir(gallery_dir)))
            page.set_input_files("#image", str(gallery_dir / name))
            page.click("button[type=submit]")
            page.wait_for_selector(".hit", timeout=20_000)
            first = page.locator(".hit").first.inner_text()
            assert first.startswith(f"#1 {name}"), first
            page.wait_for_function(
                "Array.from(document.querySelectorAll('#results img')).every(i => i.complete && i.naturalWidth > 0)",
                timeout=20_000,
            )
            if os.environ.get("FASTREID_UPDATE_SCREENSHOTS") == "1":
                target = os.path.join(
                    os.path.dirname(__file__), "..", "..", "docs", "images", "serve_search.png"
                )
                page.screenshot(path=target, full_page=True)
            assert errors == [], errors
            page.set_input_files("#image", str(text_file))
            page.click("button[type=submit]")
            page.wait_for_function("document.getElementById('error').textContent.length > 0", timeout=20_000)
            assert "Not a readable image" in page.inner_text("#error")
            assert page.locator(".hit").count() == 0
        finally:
            browser.close()


def test_serve_command_names_a_missing_model(tmp_path):
    from fastreid.cli.serve import get_parser, main
    from fastreid.utils.errors import UserError

    args = get_parser().parse_args(["--model", str(tmp_path / "nope"), "--gallery", str(tmp_path)])
    with pytest.raises(UserError, match="does not exist"):
        main(args)


def test_read_upload_refuses_while_reading():
    from fastreid.serve.uploads import UploadRejectedError, read_upload

    def endless():
        while True:
            yield b"x" * 1024

    with pytest.raises(UploadRejectedError) as caught:
        read_upload(endless(), max_bytes=10 * 1024)
    assert caught.value.status == 413
    assert io.BytesIO(read_upload([b"ab", b"c"])).read() == b"abc"
