"""The search app through FastAPI's TestClient (in process): the page, /health, /search (top-1 of a
gallery image's own copy, k from the form or the query, bad k), thumbnails by index only, the
security headers, the Host check, and the one-line message when the serve extra is missing."""

from __future__ import annotations

import os
import re
import shutil
import sys

import numpy as np
import pytest
from serve_testing import (
    BOUNDARY,
    GALLERY_SIZE,
    MAX_BYTES,
    load_test_client,
    multipart,
    skip_without_serve_extra,
)

from fastreid.serve import Gallery, GalleryError, create_app
from fastreid.utils.extras import MissingExtraError

skip_without_serve_extra()
TestClient = load_test_client()

FORM = f"multipart/form-data; boundary={BOUNDARY}"


@pytest.fixture(scope="module")
def client(gallery):
    with TestClient(create_app(gallery, max_bytes=MAX_BYTES)) as c:
        yield c


def names(gallery_dir) -> list[str]:
    return sorted(os.listdir(gallery_dir))


def search(client, data: bytes, k: str | None = "5", params=None):
    form = {} if k is None else {"k": k}
    return client.post("/search", files={"image": ("q.jpg", data, "image/jpeg")}, data=form, params=params)


def test_health(client, gallery):
    assert client.get("/health").json() == {
        "status": "ok",
        "gallery": GALLERY_SIZE,
        "feature_dim": gallery.feature_dim,
        "max_k": 100,
        "max_bytes": MAX_BYTES,
    }


def test_the_page_is_self_contained(client):
    answer = client.get("/")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/html")
    page = answer.text
    assert '<input type="file" id="image"' in page and f'<span id="size">{GALLERY_SIZE}</span>' in page
    assert (
        not re.search(r"(src|href)=\"(https?:)?//", page) and "http://" not in page and "https://" not in page
    )
    assert "default-src 'none'" in answer.headers["content-security-policy"]
    assert answer.headers["x-content-type-options"] == "nosniff"


def test_a_gallery_image_finds_itself_first(client, gallery_dir):
    name = names(gallery_dir)[7]
    answer = search(client, (gallery_dir / name).read_bytes())
    assert answer.status_code == 200, answer.text
    body = answer.json()
    hits = body["results"]
    assert [h["rank"] for h in hits] == [1, 2, 3, 4, 5]
    assert hits[0]["name"] == name and abs(hits[0]["distance"]) < 1e-4
    assert hits[0]["pid"] == int(name.split("_")[0]) and hits[0]["camid"] == int(name.split("_c")[1][0])
    assert [h["distance"] for h in hits] == sorted(h["distance"] for h in hits)
    assert body["took_ms"] >= 0
    thumb = client.get(f"/gallery/{hits[0]['index']}")
    assert thumb.status_code == 200 and thumb.content[:2] == b"\xff\xd8"
    assert thumb.headers["content-type"] == "image/jpeg"


def test_k_from_the_form_the_query_or_the_default(client, gallery_dir):
    image = (gallery_dir / names(gallery_dir)[0]).read_bytes()
    assert len(search(client, image, k=None).json()["results"]) == 10
    assert len(search(client, image, k=None, params={"k": 3}).json()["results"]) == 3
    assert len(search(client, image, k="2", params={"k": 3}).json()["results"]) == 2  # the form wins
    assert len(search(client, image, k="100").json()["results"]) == GALLERY_SIZE  # all there is
    for bad in ("0", "101", "-3", "many", "2.5"):
        answer = search(client, image, k=bad)
        assert answer.status_code == 422, (bad, answer.text)
        assert "k must be" in answer.json()["detail"]
    assert search(client, image, k=None, params={"k": "0"}).status_code == 422


def test_bad_requests_get_a_one_line_json_detail(client, gallery_dir):
    cases = {
        "not an image": (search(client, b"hello, I am text"), 415),
        "JSON instead of a form": (client.post("/search", json={"image": "x.jpg"}), 415),
        "no image field": (
            client.post("/search", content=multipart(("k", b"3", None)), headers={"content-type": FORM}),
            422,
        ),
        "a form that cannot hold a file": (client.post("/search", data={"k": "3"}), 415),
        "too large": (search(client, b"\xff\xd8" + os.urandom(MAX_BYTES)), 413),
        "no such thumbnail": (client.get(f"/gallery/{GALLERY_SIZE}"), 404),
        "negative thumbnail": (client.get("/gallery/-1"), 404),
        "a path for a thumbnail": (client.get("/gallery/..%2F..%2Fetc%2Fpasswd"), 404),
        "a name for a thumbnail": (client.get(f"/gallery/{names(gallery_dir)[0]}"), 422),
        "GET /search": (client.get("/search"), 405),
        "unknown page": (client.get("/etc/passwd"), 404),
    }
    for case, (answer, status) in cases.items():
        assert answer.status_code == status, (case, answer.status_code, answer.text)
        detail = answer.json()["detail"]
        assert isinstance(detail, str) and detail and "\n" not in detail, (case, detail)
    assert client.get("/health").json()["status"] == "ok"


def test_only_the_allowed_host_names_are_answered(gallery):
    app = create_app(gallery, allowed_hosts=["127.0.0.1", "localhost", "::1"])
    with TestClient(app, base_url="http://127.0.0.1:8000") as good:
        assert good.get("/health").status_code == 200
        assert good.get("/health", headers={"host": "[::1]:8000"}).status_code == 200
        assert good.get("/health", headers={"host": "LOCALHOST"}).status_code == 200
    with TestClient(app, base_url="http://attacker.example:8000") as rebound:
        answer = rebound.get("/health")
        assert answer.status_code == 400 and "not to 'attacker.example'" in answer.json()["detail"]


def test_a_gallery_image_gone_since_start_up_is_a_404_naming_no_path(gallery, gallery_dir, tmp_path):
    for source in names(gallery_dir)[:3]:
        shutil.copy(gallery_dir / source, tmp_path / source)
    small = Gallery.build(gallery.extractor, folder=str(tmp_path))
    gone = small.files[1]
    os.remove(gone)
    with TestClient(create_app(small)) as client:
        assert client.get("/gallery/0").status_code == 200
        answer = client.get("/gallery/1")
        assert answer.status_code == 404
        detail = answer.json()["detail"]
        assert os.path.basename(gone) in detail and str(tmp_path) not in detail
        assert client.get("/health").json()["gallery"] == 3


def test_gallery_features_of_another_model_are_refused(gallery):
    feats = np.zeros((3, gallery.feature_dim + 1), np.float32)
    with pytest.raises(GalleryError, match=f"the model makes {gallery.feature_dim}-d features"):
        Gallery(gallery.extractor, feats, ["a.jpg", "b.jpg", "c.jpg"], source="old.npy")


def test_a_missing_serve_extra_is_one_line_naming_it(gallery, monkeypatch):
    monkeypatch.setitem(sys.modules, "fastapi", None)  # import fastapi now raises ImportError
    with pytest.raises(MissingExtraError, match=r'pip install "fastreid\[serve\]"'):
        create_app(gallery)
