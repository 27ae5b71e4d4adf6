"""The fastreid-serve command: --model as a run folder or a checkpoint, --features written by
fastreid-extract, the errors a user can cause (named in one line), and the real command in a
process of its own on loopback (started, answering, stopped by Ctrl+C)."""

from __future__ import annotations

import shutil
import signal
import socket
import sys

import pytest
from serve_testing import GALLERY_SIZE, command, free_port, load_test_client, skip_without_serve_extra

from fastreid.cli.serve import build, get_parser, main, model_files, run
from fastreid.utils.errors import UserError

skip_without_serve_extra()
httpx = pytest.importorskip("httpx", reason="the loopback tests talk HTTP with httpx")
TestClient = load_test_client()


def test_model_files_of_a_run_folder_or_a_checkpoint(run_dir, tmp_path):
    config, weights = str(run_dir / "config.yaml"), str(run_dir / "model_final.pth")
    assert model_files(str(run_dir)) == (config, weights)
    assert model_files(weights) == (config, weights)  # the config beside the checkpoint
    lone = tmp_path / "lone.pth"
    lone.write_bytes(b"")
    assert model_files(str(lone), config) == (config, str(lone))
    with pytest.raises(
        UserError, match=r"config .*config.yaml does not exist \(see --model, --config-file\)"
    ):
        model_files(str(lone))
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    (unfinished / "config.yaml").write_text("")
    (unfinished / "last_checkpoint").write_text("model_0000099.pth")
    with pytest.raises(UserError, match="has no model_final.pth .* pass one of its checkpoints"):
        model_files(str(unfinished))


def test_a_missing_model_is_named_before_anything_loads(tmp_path, capsys):
    argv = ["--model", str(tmp_path / "nope"), "--gallery", str(tmp_path), "--port", str(free_port())]
    with pytest.raises(UserError, match="nope: no such run folder"):
        main(get_parser().parse_args(argv))
    assert run(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nope" in err[0], err


def test_a_busy_port_is_named(run_dir, gallery_dir):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        args = get_parser().parse_args(
            ["--model", str(run_dir), "--gallery", str(gallery_dir), "--port", str(port)]
        )
        with pytest.raises(UserError, match=f"cannot listen on 127.0.0.1:{port} .* choose another --port"):
            main(args)


def test_a_missing_serve_extra_is_one_line(run_dir, gallery_dir, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    assert run(["--model", str(run_dir), "--gallery", str(gallery_dir)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'pip install "fastreid[serve]"' in err[0], err


def test_a_gallery_from_fastreid_extract(run_dir, gallery_dir, tmp_path, fr_log):
    from fastreid.cli import extract

    feats = tmp_path / "feats"
    weights = str(run_dir / "model_final.pth")
    assert extract.run(
        ["--config-file", str(run_dir / "config.yaml"), "--input", str(gallery_dir), "--output", str(feats),
         "--device", "cpu", "MODEL.WEIGHTS", weights]
    ) == 0  # fmt: skip
    app = build(
        get_parser().parse_args(["--model", str(run_dir), "--features", str(feats), "--device", "cpu"])
    )
    query = sorted(gallery_dir.iterdir())[5]
    with TestClient(app, base_url="http://127.0.0.1") as client:
        assert client.get("/health").json()["gallery"] == GALLERY_SIZE
        answer = client.post("/search", files={"image": (query.name, query.read_bytes(), "image/jpeg")})
        assert answer.status_code == 200, answer.text
        top = answer.json()["results"][0]
        assert top["name"] == query.name and top["distance"] < 1e-4
        assert client.get(f"/gallery/{top['index']}").status_code == 200
    assert "may not be comparable" not in fr_log.text

    # the same features served with another checkpoint file: a warning, since they may not compare
    other = tmp_path / "other" / "model.pth"
    other.parent.mkdir()
    shutil.copy(weights, other)
    fr_log.clear()
    build(get_parser().parse_args(["--model", str(other), "--features", str(feats), "--config-file",
                                   str(run_dir / "config.yaml"), "--device", "cpu"]))  # fmt: skip
    assert "was extracted with weights" in fr_log.text


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="sends SIGINT, which Windows processes do not take")
def test_the_command_serves_until_ctrl_c(run_dir, gallery_dir):
    argv = ["--model", str(run_dir), "--gallery", str(gallery_dir), "--device", "cpu"]
    with command(*argv) as server:
        url = server.url
        assert httpx.get(f"{url}/health", timeout=10).json()["gallery"] == GALLERY_SIZE
        query = sorted(gallery_dir.iterdir())[2]
        answer = httpx.post(f"{url}/search", files={"image": ("q.jpg", query.read_bytes())}, timeout=30)
        assert answer.json()["results"][0]["name"] == query.name
        # a page elsewhere that resolves its own name to 127.0.0.1 gets nothing
        assert httpx.get(f"{url}/health", headers={"host": "rebind.example"}).status_code == 400
        code, out, err = server.stop(signal.SIGINT, timeout=30)
    assert code == 0, err
    assert f"Search page: {url}/" in out
