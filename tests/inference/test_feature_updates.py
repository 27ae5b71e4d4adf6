"""An extraction folder changed in place (fastreid.inference.shards.update_features): readers see
the whole update or none of it, whenever the writer dies, including a real SIGKILL of a real
process at each step of the update."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import time

import numpy as np
import pytest
import torch

from fastreid.inference.shards import (
    PENDING_UPDATE,
    FeatureShards,
    FeatureStore,
    load_features,
    update_features,
)


def extraction(folder, rows: int = 10, dim: int = 6, seed: int = 0) -> tuple[np.ndarray, list[str]]:
    """An extraction folder as fastreid-extract writes it (shards, features.npy and .pt, files.txt,
    meta.json) of ``rows`` random features."""
    feats = np.random.default_rng(seed).normal(size=(rows, dim)).astype(np.float32)
    files = [f"/data/{i:04d}_c1s1_000001_01.jpg" for i in range(rows)]
    store = FeatureStore(str(folder), files, shard_size=4, settings={"weights": "w.pth"})
    store.write([(files, torch.from_numpy(feats))])
    store.merge(["npy", "pt"])
    return feats, files


def new_state(feats: np.ndarray, files: list[str]) -> tuple[np.ndarray, list[str]]:
    """The update the tests make: row 3 removed, two rows added."""
    added = np.full((2, feats.shape[1]), 7.0, np.float32)
    return np.concatenate([np.delete(feats, 3, axis=0), added]), [
        *files[:3],
        *files[4:],
        "/new/a.jpg",
        "/new/b.jpg",
    ]


def assert_folder_holds(folder, feats: np.ndarray, files: list[str]) -> None:
    """Every way of reading the folder gives ``feats`` and ``files``."""
    got, got_files = load_features(str(folder))
    assert got_files == files and np.array_equal(got, feats)
    shards = FeatureShards.open(str(folder))
    assert shards.files == files and np.array_equal(shards.take(np.arange(len(files))), feats)
    pt = torch.load(os.path.join(folder, "features.pt"), weights_only=True)
    assert pt["files"] == files and np.array_equal(pt["features"].numpy(), feats)
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["num_files"] == len(files) and meta["feature_dim"] == feats.shape[1]
    assert meta["weights"] == "w.pth"  # the extraction's settings stay
    assert not (folder / PENDING_UPDATE).exists()


def test_an_update_changes_every_merged_file_and_the_names_together(tmp_path):
    feats, files = extraction(tmp_path)
    shards_before = sorted(os.listdir(tmp_path / "shards"))
    feats2, files2 = new_state(feats, files)
    update_features(str(tmp_path), feats2, files2)
    assert_folder_holds(tmp_path, feats2, files2)
    assert sorted(os.listdir(tmp_path / "shards")) == shards_before  # the extraction's own shards stay
    with pytest.raises(ValueError, match="N x D features for N files"):
        update_features(str(tmp_path), feats2, files2[:-1])
    assert_folder_holds(tmp_path, feats2, files2)


@pytest.mark.parametrize("step", range(1, 7))
def test_an_update_cut_at_any_step_is_read_whole_or_not_at_all(tmp_path, monkeypatch, step):
    # os.replace is each file's commit: 1 the pending update, 2-5 features.npy, .pt, files.txt and
    # meta.json; step 6 stops before the pending file is removed. The writer "dies" before its step.
    feats, files = extraction(tmp_path)
    feats2, files2 = new_state(feats, files)
    calls = []
    real_replace, real_remove = os.replace, os.remove

    class Died(BaseException):
        pass

    def replace(src, dst):
        calls.append(dst)
        if len(calls) == step:
            raise Died
        real_replace(src, dst)

    def remove(path):
        if str(path).endswith(PENDING_UPDATE) and step == 6:
            raise Died
        real_remove(path)

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "remove", remove)
    with pytest.raises(Died):
        update_features(str(tmp_path), feats2, files2)
    monkeypatch.undo()
    if step == 1:  # the update was never committed
        assert_folder_holds(tmp_path, feats, files)
    else:
        assert (tmp_path / PENDING_UPDATE).exists()
        assert_folder_holds(tmp_path, feats2, files2)


def update_until_stopped(folder: str, stop_at: int, stopped) -> None:
    """In a forked child: the tests' update of ``folder``, which stops before its ``stop_at``-th
    file commit (6: before the pending update is removed), sets ``stopped`` and waits to be killed."""
    feats, files = load_features(folder)
    feats, files = new_state(feats, files)
    real_replace, real_remove, calls = os.replace, os.remove, []

    def stop() -> None:
        stopped.set()
        time.sleep(120)  # until killed

    def replace(src, dst):
        calls.append(dst)
        if len(calls) == stop_at:
            stop()
        real_replace(src, dst)

    def remove(path):
        if stop_at == 6 and str(path).endswith(PENDING_UPDATE):
            stop()
        real_remove(path)

    os.replace, os.remove = replace, remove
    update_features(folder, feats, files)


@pytest.mark.skipif(
    "fork" not in multiprocessing.get_all_start_methods(), reason="forks a writer to kill (no fork here)"
)
def test_a_writer_killed_mid_update_loses_nothing(tmp_path):
    # a real process SIGKILLed before the pending update is renamed into place, between the merged
    # files (features.npy new, features.pt and files.txt old), and before the pending file goes.
    # (Forked: a fresh interpreter would spend seconds importing torch for a few file writes.)
    context = multiprocessing.get_context("fork")
    for stop_at in (1, 3, 6):
        folder = tmp_path / f"stop{stop_at}"
        feats, files = extraction(folder)
        stopped = context.Event()
        child = context.Process(target=update_until_stopped, args=(str(folder), stop_at, stopped))
        child.start()
        try:
            assert stopped.wait(60), "the writer did not reach its step"
            os.kill(child.pid, signal.SIGKILL)
        finally:
            child.kill()
            child.join(30)
        assert child.exitcode == -signal.SIGKILL
        if stop_at == 1:
            assert_folder_holds(folder, feats, files)
        else:
            assert_folder_holds(folder, *new_state(feats, files))
