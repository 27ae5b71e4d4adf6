"""fastreid-serve --replicas: the same app as replicas behind Ray Serve's HTTP proxy. The real
command on a Ray cluster of its own, on loopback, gives the answers of the one-process server; its
options are checked before Ray starts; without Ray, one line names the extra."""

from __future__ import annotations

import importlib.util
import signal
import sys

import pytest
from serve_testing import assert_same_answers, command, free_port, load_test_client, skip_without_serve_extra

from fastreid.cli.serve import get_parser, main, run
from fastreid.serve import create_app
from fastreid.utils.errors import UserError

skip_without_serve_extra()
httpx = pytest.importorskip("httpx", reason="the loopback tests talk HTTP with httpx")
TestClient = load_test_client()

#: Ray's own start (its GCS, raylet, Serve's controller and proxy), then the replicas' model and
#: gallery; ~40 s on a busy 2-core machine.
START_LIMIT = 300


def args(run_dir, gallery_dir, *extra: str):
    return get_parser().parse_args(["--model", str(run_dir), "--gallery", str(gallery_dir), *extra])


def test_replica_options_are_checked_before_ray_starts(run_dir, gallery_dir, tmp_path):
    cases = {
        "--allow-gallery-updates needs one process": ["--replicas", "2", "--allow-gallery-updates"],
        "--address is the Ray cluster of --replicas": ["--address", "ray://head:10001"],
        "and --replicas must not be negative": ["--replicas", "-1"],
    }
    for message, extra in cases.items():
        with pytest.raises(UserError, match=message):
            main(args(run_dir, gallery_dir, "--port", str(free_port()), *extra))


def test_without_ray_serve_one_line_names_the_extra(run_dir, gallery_dir, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray.serve", None)  # import ray.serve now raises ImportError
    assert run(["--model", str(run_dir), "--gallery", str(gallery_dir), "--replicas", "2"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'pip install "fastreid[serve-ray]"' in err[0], err


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("ray.serve") is None, reason="needs Ray Serve: pip install -e '.[serve-ray]'"
)
@pytest.mark.skipif(sys.platform == "win32", reason="stops the command with SIGINT")
def test_replicas_on_ray_serve_answer_as_one_process_does(run_dir, gallery_dir, gallery):
    # Two replicas (one CPU each) behind Ray Serve's proxy on a free loopback port, against the
    # one-process app over the same model and gallery. Slow because Ray is: its own start, Serve's
    # controller and proxy and the two replicas are ~25 s on a quiet 2-core machine, ~30 s beside
    # the rest of the suite (~90 s when Ray ran its workers at nice 15); bounded by START_LIMIT,
    # then Ctrl+C must stop all of it within 60 s.
    argv = ["--model", str(run_dir), "--gallery", str(gallery_dir), "--device", "cpu", "--replicas", "2"]
    queries = sorted(gallery_dir.iterdir())[:6]
    with command(*argv, limit=START_LIMIT, new_session=True) as server:
        url = server.url
        with TestClient(create_app(gallery), base_url="http://127.0.0.1") as one_process:
            assert httpx.get(f"{url}/health", timeout=10).json() == one_process.get("/health").json()
            assert httpx.get(f"{url}/", timeout=10).text == one_process.get("/").text
            for query in queries:
                files = {"image": (query.name, query.read_bytes(), "image/jpeg")}
                replicas = httpx.post(f"{url}/search", files=files, data={"k": "5"}, timeout=60)
                alone = one_process.post("/search", files=files, data={"k": "5"})
                assert replicas.status_code == 200, replicas.text
                assert replicas.json()["results"][0]["name"] == query.name
                assert_same_answers(replicas.json()["results"], alone.json()["results"])
            bad = httpx.post(f"{url}/search", files={"image": ("x.txt", b"hello")}, timeout=60)
            alone = one_process.post("/search", files={"image": ("x.txt", b"hello")})
            assert bad.status_code == 415 and bad.json() == alone.json()
            rebound = httpx.get(f"{url}/health", headers={"host": "rebind.example"}, timeout=10)
            assert rebound.status_code == 400  # the Host check travels with the app
        code, out, err = server.stop(signal.SIGINT)
    assert code == 0, err[-2000:]
    assert f"Search page: {url}/  (2 replicas on Ray Serve" in out
