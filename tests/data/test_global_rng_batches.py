"""Same seed, same batches for a user's dataset that draws from the global random generators
(``torch.rand`` in ``__getitem__``): 0 workers, fork and spawn workers give the same batches."""

from __future__ import annotations

import logging
import os

import pytest
import torch
from keyed_dataset_for_tests import GlobalRandDataset

from fastreid.data.data_utils import DataLoaderX
from fastreid.data.loading.factories import create_dataloader
from fastreid.data.loading.seeds import GlobalSeededDataset


def _epochs(loader, epochs: int = 2):
    out = []
    for _ in range(epochs):
        out.append([{k: v.clone() for k, v in b.items()} for b in loader])
    return out


def _same(a, b) -> bool:
    return all(
        len(ea) == len(eb)
        and all(
            all(torch.equal(x[k], y[k]) for k in ("index", "torch", "numpy", "python"))
            for x, y in zip(ea, eb)
        )
        for ea, eb in zip(a, b)
    )


@pytest.fixture(scope="module")
def zero_workers():
    return _epochs(create_dataloader(GlobalRandDataset(), batch_size=4, num_workers=0, seed=42))


@pytest.mark.slow
@pytest.mark.parametrize("method, persistent", [("fork", False), ("spawn", True)], ids=["fork", "spawn"])
def test_worker_processes_give_the_zero_worker_batches(zero_workers, method, persistent):
    """Each start method as the loader policy gives it (fastreid.data.loading.rules): fork workers
    started again each epoch (Linux), persistent spawn workers (Windows, macOS), which keep their
    processes across the two epochs (two spawned interpreters, not four)."""
    loader = create_dataloader(
        GlobalRandDataset(),
        batch_size=4,
        num_workers=2,
        seed=42,
        mp_context=method,
        persistent_workers=persistent,
    )
    assert loader.decision.num_workers == 2 and loader.decision.seed_global_rngs
    result = _epochs(loader)
    assert _same(zero_workers, result)
    assert os.getpid() not in {int(p) for epoch in result for b in epoch for p in b["pid"]}


def test_batches_differ_between_epochs_and_seeds(zero_workers):
    first, second = zero_workers
    assert not torch.equal(torch.cat([b["torch"] for b in first]), torch.cat([b["torch"] for b in second]))
    other = _epochs(create_dataloader(GlobalRandDataset(), batch_size=4, num_workers=0, seed=43))
    assert not _same(zero_workers, other)
    assert _same(
        zero_workers, _epochs(create_dataloader(GlobalRandDataset(), batch_size=4, num_workers=0, seed=42))
    )


def test_main_process_random_state_is_left_alone():
    import random

    import numpy as np

    loader = create_dataloader(GlobalRandDataset(), batch_size=4, num_workers=0, seed=42)
    torch.manual_seed(7)
    np.random.seed(7)
    random.seed(7)
    expected = (torch.rand(2), np.random.rand(), random.random())
    torch.manual_seed(7)
    np.random.seed(7)
    random.seed(7)
    list(loader)
    assert torch.equal(torch.rand(2), expected[0]) and np.random.rand() == expected[1]
    assert random.random() == expected[2]


def test_no_seed_no_reseeding():
    loader = DataLoaderX(GlobalRandDataset(), batch_size=4)
    assert not isinstance(loader.dataset, GlobalSeededDataset) and not loader.decision.seed_global_rngs
    seeded = DataLoaderX(GlobalRandDataset(), batch_size=4, seed=3)
    assert isinstance(seeded.dataset, GlobalSeededDataset) and len(seeded.dataset) == 22


def test_thread_workers_say_how_to_get_identical_batches(caplog):
    with caplog.at_level(logging.WARNING):
        loader = create_dataloader(GlobalRandDataset(), batch_size=4, num_workers=0, num_threads=2, seed=42)
    assert loader.num_threads == 2 and not loader.decision.seed_global_rngs
    assert any(
        "accepts_sample_keys = True" in w and "manual_seed(key.seed)" in w for w in loader.decision.warnings
    )
    assert sum(len(b["index"]) for b in loader) == 22


class _ByName:
    """A dataset indexed by names, with a sampler that yields them (no integer indices at all)."""

    names = ["a", "b", "c", "d", "e"]

    def __getitem__(self, name):
        return {"name_code": torch.tensor(ord(name)), "noise": torch.rand(1)}

    def __len__(self):
        return len(self.names)


def test_datasets_indexed_by_other_keys_still_load():
    ds = _ByName()
    first = list(DataLoaderX(ds, sampler=ds.names, batch_size=2, seed=5))
    assert [chr(c) for b in first for c in b["name_code"].tolist()] == ds.names
    again = list(DataLoaderX(ds, sampler=ds.names, batch_size=2, seed=5))
    assert all(torch.equal(x["noise"], y["noise"]) for x, y in zip(first, again))
