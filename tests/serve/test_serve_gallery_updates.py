"""Gallery changes while serving: POST /gallery adds images (their features computed, the index and
the features folder updated), DELETE /gallery/{name} removes one; what the next start reads is what
was answered; who may change the gallery; and a real server process SIGKILLed after its changes."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import numpy as np
import pytest
from serve_testing import command, free_port, load_test_client, skip_without_serve_extra

from fastreid.inference.shards import load_features, update_features
from fastreid.serve import Gallery, create_app, decode_upload
from fastreid.serve.gallery import ADDED_IMAGES

skip_without_serve_extra()
httpx = pytest.importorskip("httpx", reason="the loopback tests talk HTTP with httpx")
TestClient = load_test_client()

LOCAL = ("127.0.0.1", 50000)
KEPT = 6  # gallery images in the editable gallery's folder


@pytest.fixture
def features_dir(gallery, tmp_path):
    """An extraction folder of the first ``KEPT`` images of the session gallery (written as an
    update of an empty folder: features.npy, files.txt, meta.json)."""
    folder = tmp_path / "feats"
    folder.mkdir()
    update_features(str(folder), gallery.feats[:KEPT], gallery.files[:KEPT])
    return folder


@pytest.fixture
def editable(gallery, features_dir):
    return Gallery.build(gallery.extractor, features=str(features_dir), editable=True)


def queries(synthetic_market_root, count: int = 2) -> list[bytes]:
    """Images of the synthetic Market-1501's query set (none of them in the gallery)."""
    folder = Path(synthetic_market_root, "Market-1501-v15.09.15", "query")
    return [p.read_bytes() for p in sorted(folder.iterdir())[:count]]


def upload(*items: tuple[str, bytes]) -> list:
    return [("image", (name, data, "image/jpeg")) for name, data in items]


def top(client, data: bytes) -> dict:
    answer = client.post("/search", files={"image": ("q.jpg", data, "image/jpeg")}, data={"k": "3"})
    assert answer.status_code == 200, answer.text
    return answer.json()["results"][0]


def test_added_images_are_found_and_kept_removed_ones_are_gone(
    gallery, editable, features_dir, synthetic_market_root
):
    first, second = queries(synthetic_market_root)
    with TestClient(create_app(editable), client=LOCAL) as client:
        assert top(client, first)["distance"] > 1e-4  # not in the gallery yet
        answer = client.post("/gallery", files=upload(("new_a.jpg", first), ("new_b.jpg", second)))
        assert answer.status_code == 200, answer.text
        assert answer.json() == {
            "added": [{"index": KEPT, "name": "new_a.jpg"}, {"index": KEPT + 1, "name": "new_b.jpg"}],
            "gallery": KEPT + 2,
        }
        on_disk = load_features(str(features_dir))[1]  # kept as soon as it was answered
        assert on_disk == [
            *gallery.files[:KEPT],
            *(str(features_dir / ADDED_IMAGES / n) for n in ("new_a.jpg", "new_b.jpg")),
        ]
        hit = top(client, first)
        assert hit["name"] == "new_a.jpg" and hit["distance"] < 1e-4 and "pid" not in hit
        assert client.get(f"/gallery/{hit['index']}?name=new_a.jpg").status_code == 200
        assert client.get("/health").json()["gallery"] == KEPT + 2

        removed = os.path.basename(gallery.files[2])
        answer = client.delete(f"/gallery/{removed}")
        assert answer.status_code == 200 and answer.json() == {"removed": removed, "gallery": KEPT + 1}
        assert gallery.files[2] not in load_features(str(features_dir))[1]
        assert client.delete("/gallery/new_b.jpg").status_code == 200
        assert not (features_dir / ADDED_IMAGES / "new_b.jpg").exists()  # a file the server added goes
        assert os.path.exists(gallery.files[2])  # the user's own image stays on disk
        # a thumbnail asked by an index from before the change names the change, not another image
        stale = client.get(f"/gallery/{KEPT - 1}?name={os.path.basename(gallery.files[KEPT - 1])}")
        assert stale.status_code == 404 and "the gallery changed" in stale.json()["detail"]

    # what the next start reads: the last answered state, each row the feature of its own image
    feats, files = load_features(str(features_dir))
    expected = [f for i, f in enumerate(gallery.files[:KEPT]) if i != 2] + [
        str(features_dir / ADDED_IMAGES / "new_a.jpg")
    ]
    assert files == expected
    assert np.allclose(feats[: KEPT - 1], np.delete(gallery.feats[:KEPT], 2, axis=0))
    restarted = Gallery.build(gallery.extractor, features=str(features_dir))
    hit = restarted.search(decode_upload(first), 1)[0]
    assert hit["name"] == "new_a.jpg" and hit["distance"] < 1e-4


def test_changes_that_cannot_be_made_are_refused_and_change_nothing(
    gallery, editable, features_dir, synthetic_market_root
):
    image = queries(synthetic_market_root, 1)[0]
    taken = os.path.basename(gallery.files[0])
    with TestClient(create_app(editable), client=LOCAL) as client:
        cases = {
            "a name with a folder": (client.post("/gallery", files=upload(("../evil.jpg", image))), 400),
            "a name that is no image file": (
                client.post("/gallery", files=upload(("notes.txt", image))),
                400,
            ),
            "a name taken": (client.post("/gallery", files=upload((taken, image))), 409),
            "one name twice": (
                client.post("/gallery", files=upload(("x.jpg", image), ("x.jpg", image))),
                400,
            ),
            "not an image": (client.post("/gallery", files=upload(("ok.jpg", b"hello"))), 415),
            "no image": (client.post("/gallery", data={"k": "1"}, files={"other": ("a", b"")}), 400),
            "too many": (
                client.post("/gallery", files=upload(*[(f"i{i}.jpg", image) for i in range(17)])),
                400,
            ),
            "no such image": (client.delete("/gallery/nobody.jpg"), 404),
            "from a page of another site": (
                client.post(
                    "/gallery", files=upload(("ok.jpg", image)), headers={"origin": "http://evil.example"}
                ),
                403,
            ),
            "a cross-site fetch": (
                client.delete(f"/gallery/{taken}", headers={"sec-fetch-site": "cross-site"}),
                403,
            ),
        }
        for case, (answer, status) in cases.items():
            assert answer.status_code == status, (case, answer.status_code, answer.text)
            detail = answer.json()["detail"]
            assert isinstance(detail, str) and detail and "\n" not in detail, (case, detail)
        assert "ok.jpg: Not a readable image" in cases["not an image"][0].json()["detail"]
        assert client.get("/health").json()["gallery"] == KEPT
    assert load_features(str(features_dir))[1] == gallery.files[:KEPT]
    assert not (features_dir / ADDED_IMAGES / "ok.jpg").exists()

    with TestClient(create_app(editable), client=("192.168.1.20", 50000)) as remote:
        answer = remote.delete(f"/gallery/{taken}")
        assert answer.status_code == 403 and "this machine only" in answer.json()["detail"]
    with TestClient(create_app(gallery), client=LOCAL) as read_only:
        answer = read_only.delete(f"/gallery/{taken}")
        assert answer.status_code == 403 and "--allow-gallery-updates" in answer.json()["detail"]
    last = Gallery(gallery.extractor, gallery.feats[:1], gallery.files[:1], folder=str(features_dir))
    with TestClient(create_app(last), client=LOCAL) as client:
        answer = client.delete(f"/gallery/{taken}")
        assert answer.status_code == 409 and "cannot be empty" in answer.json()["detail"]


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="sends SIGKILL")
def test_a_server_killed_after_its_changes_restarts_with_them(
    run_dir, gallery, features_dir, synthetic_market_root
):
    # the real command, SIGKILLed (no shutdown of any kind) right after its answers; the next start
    # serves what was answered. (~10 s: one server start, the process boundary is what is tested.)
    from fastreid.cli.serve import build, get_parser

    argv = [
        "--model",
        str(run_dir),
        "--features",
        str(features_dir),
        "--allow-gallery-updates",
        "--device",
        "cpu",
    ]
    first, second = queries(synthetic_market_root)
    removed = os.path.basename(gallery.files[1])
    with command(*argv) as server:
        url = server.url
        answer = httpx.post(f"{url}/gallery", files=upload(("new_a.jpg", first)), timeout=30)
        assert answer.status_code == 200, answer.text
        assert httpx.delete(f"{url}/gallery/{removed}", timeout=30).status_code == 200
        answer = httpx.post(f"{url}/gallery", files=upload(("new_b.jpg", second)), timeout=30)
        assert answer.status_code == 200 and answer.json()["gallery"] == KEPT + 1
        assert server.stop(signal.SIGKILL)[0] == -signal.SIGKILL
    app = build(get_parser().parse_args([*argv, "--port", str(free_port())]))
    with TestClient(app, base_url="http://127.0.0.1", client=LOCAL) as client:
        assert client.get("/health").json()["gallery"] == KEPT + 1
        assert top(client, second)["name"] == "new_b.jpg"
        assert client.delete(f"/gallery/{removed}").status_code == 404
