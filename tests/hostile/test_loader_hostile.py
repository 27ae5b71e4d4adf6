"""Hostile input for the data loaders, with real files and real processes: a sample that never
returns (a FIFO) in every loading mode, decompression bombs, a fork worker killed mid-epoch, the
trainer killed with -9, an absurd thread count. A fresh interpreter where the process is what is
tested: its exit with a stuck thread, its peak memory, its workers after a kill -9."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import signal
import struct
import subprocess
import sys
import textwrap
import threading
import time
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
from loader_hostile_datasets import FileDataset
from PIL import Image

from fastreid.data.data_utils import (
    DataLoaderX,
    ImageReadError,
    ImageTooLargeError,
    read_image,
    read_image_tensor,
)
from fastreid.data.loading.errors import SampleLoadError

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="FIFOs, fork and kill -9: Linux")


def _jpeg(path: Path, h: int = 32, w: int = 16, seed: int = 0) -> str:
    pixels = np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path, quality=90)
    return str(path)


@pytest.fixture
def files(tmp_path):
    """A FIFO (a read that never returns) first, then ordinary JPEGs."""
    fifo = tmp_path / "0000_c1s1_000001_00.jpg"
    os.mkfifo(fifo)
    good = [_jpeg(tmp_path / f"{i:04d}_c1s1_000001_00.jpg", seed=i) for i in range(1, 6)]
    return str(fifo), [str(fifo), *good]


# ------------------------------------------------------------------------------------------- timeouts
def _loader_kwargs(mode: str) -> dict:
    return {
        "zero": {},
        "threads": {"num_threads": 2},
        "fork": {"num_workers": 1, "multiprocessing_context": "fork"},
        "spawn": {"num_workers": 1, "multiprocessing_context": "spawn"},
    }[mode]


def _fastreid_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("fastreid-")]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["zero", "threads", "fork", "spawn"])
def test_fifo_sample_times_out_in_every_mode(files, mode):
    """In this process: the timeout fires, and once a writer appears the abandoned read returns and
    every loading thread and worker process ends (the spawn worker is a real interpreter)."""
    fifo, paths = files
    timeout = 6 if mode == "spawn" else 2  # spawn workers take seconds to start on a busy machine
    threads_before, children_before = set(_fastreid_threads()), set(multiprocessing.active_children())
    loader = DataLoaderX(FileDataset(paths), batch_size=2, timeout=timeout, **_loader_kwargs(mode))
    start = time.monotonic()
    with pytest.raises(SampleLoadError) as info:
        for _ in loader:
            pass
    elapsed = time.monotonic() - start
    error = str(info.value)
    assert f"DATALOADER.TIMEOUT={timeout}" in error and "batch 0" in error and fifo in error, error
    assert elapsed < timeout + 15, error  # fires: not the hang it used to be
    del loader
    os.close(os.open(fifo, os.O_RDWR))  # a writer appears (Linux: never blocks, counts as a writer)

    def left() -> tuple[list, list]:
        threads = [t for t in _fastreid_threads() if t not in threads_before]
        return threads, [p for p in multiprocessing.active_children() if p not in children_before]

    deadline = time.monotonic() + 5
    while any(left()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left() == ([], []), left()


# loaders whose read never returns, in a fresh interpreter: does the interpreter still end?
FIFO_SCRIPT = """
import json, sys, threading
sys.path.insert(0, {here!r})
from loader_hostile_datasets import FileDataset
from fastreid.data.data_utils import DataLoaderX, SampleLoadError


def fastreid_threads():
    return {{t for t in threading.enumerate() if t.name.startswith("fastreid-")}}


def main():
    paths = json.loads(sys.argv[1])
    for mode in sys.argv[2:]:
        before = fastreid_threads()
        kwargs = {{"zero": {{}}, "threads": {{"num_threads": 2}}}}[mode]
        loader = DataLoaderX(FileDataset(paths), batch_size=2, timeout={timeout}, **kwargs)
        try:
            for _ in loader:
                pass
            print(mode, "NO ERROR", flush=True)
        except SampleLoadError as exc:
            print(mode, "ERROR", exc, flush=True)
        print(mode, "STUCK THREADS", sorted(t.name for t in fastreid_threads() - before), flush=True)


if __name__ == "__main__":
    main()
"""
STUCK_MODES = ["zero", "threads"]


@pytest.fixture(scope="module")
def stuck_run(tmp_path_factory):
    """One interpreter that meets a FIFO nobody ever writes to in each mode of STUCK_MODES, in
    turn: (FIFO path, the completed process)."""
    folder = tmp_path_factory.mktemp("stuck")
    fifo = folder / "0000_c1s1_000001_00.jpg"
    os.mkfifo(fifo)
    paths = [str(fifo), *(_jpeg(folder / f"{i:04d}_c1s1_000001_00.jpg", seed=i) for i in range(1, 6))]
    script = folder / "fifo_loader.py"
    script.write_text(FIFO_SCRIPT.format(here=str(HERE), timeout=1))
    proc = subprocess.run(
        [sys.executable, str(script), json.dumps(paths), *STUCK_MODES],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    return str(fifo), proc


@pytest.mark.slow
@pytest.mark.parametrize("mode", STUCK_MODES)
def test_stuck_thread_is_abandoned_not_joined(stuck_run, mode):
    """Nobody ever writes to the FIFO: the daemon thread stays blocked, and neither the loader nor
    the interpreter's exit waits for it (one interpreter for the modes, each mode's own lines)."""
    fifo, proc = stuck_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line[len(mode) + 1 :] for line in proc.stdout.splitlines() if line.startswith(f"{mode} ")]
    assert any(line.startswith("ERROR") and fifo in line for line in lines), proc.stdout
    stuck = next(line for line in lines if line.startswith("STUCK THREADS"))
    assert "fastreid-" in stuck  # still blocked in open(), yet the process ended


def test_main_process_without_timeout_uses_no_thread(files):
    _, paths = files
    loader = DataLoaderX(FileDataset(paths[1:]), batch_size=2)  # timeout 0: torch's own loop
    assert len(list(loader)) == 3 and not loader._timed_main
    timed = DataLoaderX(FileDataset(paths[1:]), batch_size=2, timeout=5)
    assert [b["index"].tolist() for b in timed] == [[0, 1], [2, 3], [4]] and timed._timed_main


# ------------------------------------------------------------------------------------ decompression
def _png_claiming(path: Path, width: int, height: int) -> str:
    """A valid-looking PNG header that claims width x height; a few hundred bytes on disk."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    data = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b"\0" * 1000))
        + chunk(b"IEND", b"")
    )
    path.write_bytes(data)
    return str(path)


def _jpeg_claiming(path: Path, width: int, height: int) -> str:
    """A small real JPEG whose start-of-frame marker is patched to claim width x height."""
    _jpeg(path, 16, 16)
    data = bytearray(path.read_bytes())
    sof = data.find(b"\xff\xc0")
    assert sof > 0
    data[sof + 5 : sof + 9] = struct.pack(">HH", height, width)
    path.write_bytes(bytes(data))
    return str(path)


@pytest.mark.parametrize("make", [_png_claiming, _jpeg_claiming], ids=["png", "jpeg"])
def test_decompression_bomb_refused_from_the_header(tmp_path, make):
    suffix = ".png" if make is _png_claiming else ".jpg"
    bomb = make(tmp_path / f"0001_c1s1_000001_00{suffix}", 20000, 20000)
    assert os.path.getsize(bomb) < 5000
    for read in (read_image_tensor, read_image):
        with pytest.raises(ImageTooLargeError) as info:
            read(bomb)
        message = str(info.value)
        assert bomb in message and "20000x20000" in message and "INPUT.MAX_IMAGE_PIXELS" in message
        assert isinstance(info.value, ImageReadError) and isinstance(info.value, ValueError)


@pytest.mark.slow
def test_decompression_bomb_allocates_nothing(tmp_path):
    bomb = _jpeg_claiming(tmp_path / "bomb.jpg", 20000, 20000)
    code = textwrap.dedent(f"""
        import resource
        from fastreid.data.data_utils import ImageTooLargeError, read_image_tensor
        read_image_tensor({_jpeg(tmp_path / "warm.jpg")!r})
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            read_image_tensor({bomb!r})
        except ImageTooLargeError:
            print("REFUSED", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)
    """)
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.stdout.startswith("REFUSED"), proc.stdout + proc.stderr
    assert int(proc.stdout.split()[1]) < 50_000  # KiB: nowhere near the 1.2 GB a decode would take


def test_pixel_limit_is_configurable(tmp_path):
    small = _jpeg(tmp_path / "small.jpg", 32, 16)
    assert read_image_tensor(small, max_pixels=512).shape == (3, 32, 16)
    with pytest.raises(ImageTooLargeError, match="32 = 512 pixels|16x32"):
        read_image_tensor(small, max_pixels=511)
    assert read_image(small, max_pixels=0).size == (16, 32)  # 0: no limit
    with pytest.raises(ValueError, match="INPUT.MAX_IMAGE_PIXELS"):
        read_image_tensor(small, max_pixels=-1)
    from fastreid.config import get_cfg
    from fastreid.data.common import CommDataset

    cfg = get_cfg()
    assert cfg.INPUT.MAX_IMAGE_PIXELS == Image.MAX_IMAGE_PIXELS
    dataset = CommDataset([(small, 1, 0)], None, relabel=False, max_pixels=100)
    with pytest.raises(ImageTooLargeError, match="INPUT.MAX_IMAGE_PIXELS"):
        dataset[0]


# ------------------------------------------------------------------------------------ worker deaths
def test_fork_worker_killed_mid_epoch_is_a_sample_load_error(tmp_path):
    paths = [_jpeg(tmp_path / f"{i:04d}_c1s1_000001_00.jpg", seed=i) for i in range(40)]
    loader = DataLoaderX(
        FileDataset(paths, delay=0.05),
        batch_size=2,
        num_workers=2,
        multiprocessing_context="fork",
        timeout=60,
    )
    batches = iter(loader)
    pid = int(next(batches)["pid"][0])
    with pytest.raises(SampleLoadError) as info:
        os.kill(pid, signal.SIGKILL)
        time.sleep(1.0)  # the trainer is busy elsewhere (optimizer.step()) when SIGCHLD arrives
        for _ in batches:
            pass
    message = str(info.value)
    assert f"(pid {pid})" in message and "SIGKILL" in message and "died" in message, message
    assert "batch" in message


TRAINER_SCRIPT = """
import sys, time
sys.path.insert(0, {here!r})
from loader_hostile_datasets import FileDataset
from fastreid.data.data_utils import DataLoaderX


def main():
    loader = DataLoaderX(FileDataset({paths!r}, delay=0.01), batch_size=2, num_workers=2,
                         multiprocessing_context={method!r}, persistent_workers=True, timeout=60)
    pids = set()
    for batch in loader:
        pids.update(int(p) for p in batch["pid"])
    print("WORKERS", " ".join(map(str, sorted(pids))), flush=True)
    iterator = iter(loader)
    next(iterator)
    time.sleep(600)


if __name__ == "__main__":
    main()
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_workers_exit_when_the_trainer_is_killed(tmp_path, method):
    paths = [_jpeg(tmp_path / f"{i:04d}_c1s1_000001_00.jpg", seed=i) for i in range(8)]
    script = tmp_path / "trainer.py"
    script.write_text(TRAINER_SCRIPT.format(here=str(HERE), paths=paths, method=method))
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("WORKERS"), line
        workers = [int(p) for p in line.split()[1:]]
        assert len(workers) == 2 and all(_alive(p) for p in workers)
        proc.kill()  # kill -9 of the trainer
        proc.wait(timeout=30)
        deadline = time.monotonic() + 2.5
        while any(_alive(p) for p in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [p for p in workers if _alive(p)], "workers outlived the trainer"
    finally:
        proc.kill()
        proc.stdout.close()


# ------------------------------------------------------------------------------------- thread count
def test_absurd_thread_count_is_capped_and_said_once(caplog, tmp_path):
    paths = [_jpeg(tmp_path / f"{i:04d}.jpg", seed=i) for i in range(6)]
    with caplog.at_level(logging.WARNING, logger="fastreid"):
        loader = DataLoaderX(FileDataset(paths), batch_size=2, num_threads=1000)
        again = DataLoaderX(FileDataset(paths), batch_size=2, num_threads=1000)
    from fastreid.data.loading.draft import MAX_THREAD_BATCHES_IN_FLIGHT

    assert loader.decision.thread_prefetch == again.decision.thread_prefetch == MAX_THREAD_BATCHES_IN_FLIGHT
    assert any("2000 batches" in w and "capped" in w for w in loader.decision.warnings)
    assert len([r for r in caplog.records if "2000 batches" in r.getMessage()]) <= 1  # said once
    assert sum(len(b["index"]) for b in loader) == 6
    assert torch.utils.data.get_worker_info() is None
