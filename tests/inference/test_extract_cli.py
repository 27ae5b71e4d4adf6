"""tools/extract_features.py as a user runs it: output order, resuming, one-line errors."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures import Future

import numpy as np
import pytest
import torch
from PIL import Image

from fastreid.cli import extract as extract_cli
from fastreid.cli.extract import run
from fastreid.inference import FeatureExtractor

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TOOL = os.path.join(REPO, "tools", "extract_features.py")


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = "1"
    return env


def _argv(config_file, weights, inputs, output, *extra) -> list[str]:
    return ["--config-file", config_file, "--input", *inputs, "--output", str(output), "--device", "cpu",
            *extra, "MODEL.WEIGHTS", weights]  # fmt: skip


@pytest.fixture
def extract(run_tool):
    """``extract(config_file, weights, inputs, output, *extra, check=True)``: fastreid-extract run
    in this process (what tools/extract_features.py calls), one torch thread as OMP_NUM_THREADS=1
    gives a process."""

    def call(config_file, weights, inputs, output, *extra, check=True):
        proc = run_tool(
            run, *_argv(config_file, weights, inputs, output, *extra), env={"OMP_NUM_THREADS": "1"}
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc

    return call


def _images(folder, count: int, seed: int = 0) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(count):
        path = folder / f"{i:04d}.png"
        Image.fromarray(rng.integers(0, 256, (48, 24, 3), dtype=np.uint8)).save(path)
        paths.append(str(path))
    return paths


@pytest.mark.slow
def test_output_order_formats_and_resume_skips_finished_shards(tmp_path, tiny_model_files, extract):
    config_file, weights = tiny_model_files
    paths = _images(tmp_path / "crops" / "b", 7) + _images(tmp_path / "crops" / "a", 6, seed=1)
    out = tmp_path / "out"
    extract(
        config_file,
        weights,
        [str(tmp_path / "crops")],
        out,
        "--shard-size",
        "5",
        "--batch-size",
        "3",
        "--format",
        "both",
    )
    files = (out / "files.txt").read_text().splitlines()
    # a folder is walked in sorted order: a/ before b/
    assert files == sorted(paths, key=lambda p: (os.path.basename(os.path.dirname(p)), p))
    feats = np.load(out / "features.npy")
    expected = FeatureExtractor(config_file=config_file, weights=weights, device="cpu")(files).numpy()
    np.testing.assert_allclose(feats, expected, atol=1e-5)
    pt = torch.load(out / "features.pt", weights_only=True)
    assert pt["files"] == files and torch.equal(pt["features"], torch.from_numpy(feats))
    assert sorted(os.listdir(out / "shards")) == ["00000.npy", "00001.npy", "00002.npy"]

    # shard 1 pre-created by "an earlier run" (marked values), shard 2 and the merged file missing
    np.save(out / "shards" / "00001.npy", np.full((5, feats.shape[1]), 7.0, np.float32))
    os.remove(out / "shards" / "00002.npy")
    os.remove(out / "features.npy")
    proc = extract(
        config_file, weights, [str(tmp_path / "crops")], out, "--shard-size", "5", "--batch-size", "3"
    )
    assert "Resuming: 2 of 3 shards already finished" in proc.stdout + proc.stderr
    again = np.load(out / "features.npy")
    np.testing.assert_array_equal(again[5:10], 7.0)  # skipped, not recomputed
    np.testing.assert_allclose(again[10:], feats[10:], atol=1e-5)
    np.testing.assert_array_equal(again[:5], feats[:5])

    # other inputs into the same folder: refused in one line, nothing deleted
    proc = extract(
        config_file, weights, [str(tmp_path / "crops" / "a")], out, "--shard-size", "5", check=False
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert "OutputMismatchError" in proc.stderr and "--overwrite" in proc.stderr
    assert (out / "shards" / "00001.npy").exists()


@pytest.mark.slow
def test_killed_extraction_resumes_to_the_same_features(tmp_path, tiny_model_files, extract):
    config_file, weights = tiny_model_files
    _images(tmp_path / "crops", 240)
    reference_out, out = tmp_path / "reference", tmp_path / "out"
    args = ["--shard-size", "10", "--batch-size", "5"]
    extract(config_file, weights, [str(tmp_path / "crops")], reference_out, *args)
    # the process killed is a real one (tools/extract_features.py), as a user's would be
    cmd = [sys.executable, TOOL, *_argv(config_file, weights, [str(tmp_path / "crops")], out, *args)]
    proc = subprocess.Popen(cmd, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if (out / "shards" / "00001.npy").exists():
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(0.005)
    finally:
        proc.wait(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the extraction finished before it could be killed (machine too fast)")
    finished = len(os.listdir(out / "shards"))
    assert 0 < finished < 24 and not (out / "features.npy").exists()
    proc = extract(config_file, weights, [str(tmp_path / "crops")], out, *args)
    assert "Resuming:" in proc.stdout + proc.stderr
    np.testing.assert_allclose(
        np.load(out / "features.npy"), np.load(reference_out / "features.npy"), atol=1e-5
    )
    assert (out / "files.txt").read_text() == (reference_out / "files.txt").read_text()


@pytest.mark.slow
def test_bad_weights_and_missing_input_are_one_line_errors(tmp_path, tiny_model_files, extract):
    config_file, weights = tiny_model_files
    _images(tmp_path / "crops", 2)
    proc = extract(
        config_file, str(tmp_path / "missing.pth"), [str(tmp_path / "crops")], tmp_path / "o1", check=False
    )
    assert (
        proc.returncode == 1
        and proc.stderr.strip().startswith("CheckpointError:")
        and "missing.pth" in proc.stderr
    )
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    proc = extract(config_file, weights, [str(tmp_path / "nothing-here")], tmp_path / "o2", check=False)
    assert proc.returncode == 1 and proc.stderr.strip().startswith("NoImagesError:")
    assert "Traceback" not in proc.stderr


class _InlinePool:
    """ProcessPoolExecutor's interface, each task run in this process when it is submitted."""

    def __init__(self, max_workers: int, mp_context=None) -> None:
        self.max_workers = max_workers

    def __enter__(self) -> _InlinePool:
        return self

    def __exit__(self, *exc) -> None:
        return None

    def submit(self, fn, *args) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args))
        except Exception as e:
            future.set_exception(e)
        return future


@pytest.mark.slow
def test_several_processes_name_a_failure_resume_and_write_the_same_bytes_as_one(
    tmp_path, tiny_model_files, extract, monkeypatch
):
    """--num-processes 2 splits the shards (r, r + 2, ...): a process that fails is named and no
    merged file claims completeness, the other process's shards are kept; once the bad file is
    mended, the run resumes (the finished shards untouched) and gives the single-process result
    byte for byte (one torch thread per process in both, as OMP_NUM_THREADS=1 sets here).

    The failing run is a real pool of two spawned processes (~15 s of CPU, nearly all two
    interpreters importing torch): the process boundary (arguments pickled, a worker writing its
    shards from its own process, its exception named across the boundary) is what it tests. The
    resumed run's two workers run in this process (the pool swapped for :class:`_InlinePool`):
    what it tests is this side of the pool, each worker skipping its finished shards and the merge
    after the pool, not the spawn again."""
    config_file, weights = tiny_model_files
    crops = tmp_path / "crops"
    paths = _images(crops, 23, seed=5)
    with open(sorted(paths)[9], "wb") as f:  # shard 2 (rows 8..11), owned by process 0 of 2
        f.write(b"not a png")
    two = tmp_path / "two"
    args = ["--shard-size", "4", "--batch-size", "3", "--num-processes", "2"]
    proc = extract(config_file, weights, [str(crops)], two, *args, check=False)
    assert proc.returncode != 0
    assert "Extraction process 0 of 2 failed" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert "Extracting with 2 processes" in proc.stderr + proc.stdout
    assert not (two / "features.npy").exists()
    shards = two / "shards"
    # process 1's shards 1, 3, 5 all written by its own process; process 0's shard 0 before it failed
    assert sorted(os.listdir(shards)) == ["00000.npy", "00001.npy", "00003.npy", "00005.npy"]
    finished = {name: os.stat(shards / name).st_mtime_ns for name in os.listdir(shards)}

    Image.fromarray(np.zeros((48, 24, 3), np.uint8)).save(sorted(paths)[9], format="PNG")
    monkeypatch.setattr(extract_cli, "ProcessPoolExecutor", _InlinePool)
    again = extract(config_file, weights, [str(crops)], two, *args)
    assert "Extracting with 2 processes" in again.stderr + again.stdout
    assert "Resuming: 4 of 6 shards already finished" in again.stderr + again.stdout
    assert (two / "features.npy").is_file()
    assert {name: os.stat(shards / name).st_mtime_ns for name in finished} == finished

    one = tmp_path / "one"
    extract(config_file, weights, [str(crops)], one, "--shard-size", "4", "--batch-size", "3")
    assert (one / "files.txt").read_text() == (two / "files.txt").read_text()
    assert (one / "features.npy").read_bytes() == (two / "features.npy").read_bytes()
    for k in range(6):
        assert (one / "shards" / f"{k:05d}.npy").read_bytes() == (
            two / "shards" / f"{k:05d}.npy"
        ).read_bytes()
