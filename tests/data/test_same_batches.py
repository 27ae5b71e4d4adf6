"""Same seed, same batches (indices and pixels) whatever loads them: zero workers, fork and spawn
worker processes, thread workers, with and without the background generator; plus the per-sample
seeds themselves."""

from __future__ import annotations

import os

import pytest
import torch
from keyed_dataset_for_tests import KeyedAugDataset
from torch.utils.data import BatchSampler, SequentialSampler

from fastreid.config import get_cfg
from fastreid.data.data_utils import DataLoaderX
from fastreid.data.loading.factories import build_dataloader
from fastreid.data.loading.seeds import SampleKey, SeededBatchSampler, mix_seed
from fastreid.utils.platform import forced_platform

SEED = 1234
EPOCHS = 2


def _epochs(loader, epochs: int = EPOCHS, background_from_epoch: int | None = None):
    out = []
    for epoch in range(epochs):
        if background_from_epoch is not None:
            loader.background = epoch >= background_from_epoch
        out.append(
            [
                (b["index"].clone(), b["images"].clone(), b["pid"].clone(), b["imported_here"].clone())
                for b in loader
            ]
        )
    return out


def _loader(**kwargs):
    return DataLoaderX(
        KeyedAugDataset(n=26), batch_size=4, shuffle=True, drop_last=False, seed=SEED, timeout=60, **kwargs
    )


@pytest.fixture(scope="module")
def reference():
    return _epochs(_loader())


def _assert_same(reference, result):
    assert len(result) == len(reference)
    for ref_epoch, epoch in zip(reference, result):
        assert len(epoch) == len(ref_epoch) == 7
        for (ri, rx, _, _), (i, x, _, _) in zip(ref_epoch, epoch):
            assert torch.equal(ri, i)
            assert torch.equal(rx, x)


def test_reference_is_shuffled_and_augmented(reference):
    first, second = reference
    assert not torch.equal(torch.cat([b[0] for b in first]), torch.arange(26))
    assert sorted(torch.cat([b[0] for b in first]).tolist()) == list(range(26))
    # the same index gets different augmentation in another epoch
    pos1 = {int(i): x for b in first for i, x in zip(b[0], b[1])}
    pos2 = {int(i): x for b in second for i, x in zip(b[0], b[1])}
    assert sum(not torch.equal(pos1[k], pos2[k]) for k in pos1) > 20


@pytest.mark.parametrize(
    "mode",
    [
        {"background": True},
        {"num_threads": 2},
        {"num_threads": 2, "background": True},
        {"num_workers": 2, "multiprocessing_context": "fork"},
        {"num_workers": 2, "multiprocessing_context": "fork", "background": True, "persistent_workers": True},
    ],
    ids=["zero+bg", "threads", "threads+bg", "fork", "fork+bg+persistent"],
)
def test_same_batches(reference, mode):
    result = _epochs(_loader(**mode))
    _assert_same(reference, result)
    pids = {int(p) for epoch in result for b in epoch for p in b[2]}
    if mode.get("num_workers"):
        assert os.getpid() not in pids and len(pids) == (2 if mode.get("persistent_workers") else 2 * EPOCHS)
        assert not any(bool(f) for epoch in result for b in epoch for f in b[3])  # forked, not re-imported
    else:
        assert pids == {os.getpid()}


@pytest.mark.slow
def test_same_batches_spawn_workers_really_spawned(reference):
    loader = _loader(num_workers=2, multiprocessing_context="spawn", persistent_workers=True)
    try:
        result = _epochs(loader, background_from_epoch=1)  # epoch 0 without, epoch 1 with the generator
    finally:
        loader.shutdown()
    _assert_same(reference, result)
    pids = {int(p) for epoch in result for b in epoch for p in b[2]}
    assert os.getpid() not in pids and len(pids) == 2  # persistent: the same 2 workers both epochs
    # the test module was imported afresh inside each worker: spawn, not fork
    assert all(bool(f) for epoch in result for b in epoch for f in b[3])


def test_build_dataloader_from_cfg_gives_the_same_batches(reference):
    cfg = get_cfg()
    cfg.DATALOADER.NUM_WORKERS = 4
    cfg.DATALOADER.NUM_THREADS = 2
    ds = KeyedAugDataset(n=26)
    order = _loader().batch_sampler  # the same shuffled batch sampler DataLoaderX builds for this seed
    with forced_platform("windows"):  # WINDOWS_SAFE: thread workers
        loader = build_dataloader(
            ds,
            batch_sampler=order.batch_sampler.batch_sampler,
            collate_fn=None,
            cfg=cfg,
            device="cpu",
            seed=SEED,
        )
    assert (loader.num_workers, loader.num_threads) == (0, 2)
    _assert_same(reference, _epochs(loader))


# --------------------------------------------------------------------------------------------- seeds
def test_mix_seed_is_deterministic_and_sensitive():
    assert mix_seed(1, 2, 3) == mix_seed(1, 2, 3)
    assert 0 <= mix_seed(-1, 2**70) < 2**63
    seeds = {mix_seed(7, e, r, b, j) for e in range(3) for r in range(2) for b in range(5) for j in range(4)}
    assert len(seeds) == 3 * 2 * 5 * 4
    assert mix_seed(1, 2) != mix_seed(2, 1) and mix_seed(0) != mix_seed(0, 0)


def test_seeded_batch_sampler_keys_epochs_and_resume():
    inner = BatchSampler(SequentialSampler(range(10)), 3, False)
    s = SeededBatchSampler(inner, seed=5, rank=1)
    epoch0, epoch1 = list(s), list(s)
    assert epoch0[1][2] == SampleKey(5, mix_seed(5, 0, 1, 1, 2))
    assert epoch1[1][2] == SampleKey(5, mix_seed(5, 1, 1, 1, 2))
    assert len(s) == 4
    s.set_epoch(0)
    unused = iter(s)  # torch creates and drops an iterator with worker processes
    assert list(s) == epoch0 and unused is not None
    # resuming at batch 2: the inner sampler starts there, the keys continue the numbering
    resumed = SeededBatchSampler([[6, 7, 8], [9]], seed=5, rank=1, start_batch=2)
    assert list(resumed) == epoch0[2:]
    with pytest.raises(TypeError):
        SeededBatchSampler(s, seed=1)


@pytest.mark.parametrize(("seed", "rank", "start", "epoch"), [(0, 0, 0, 0), (-3, 2, 7, 4), (2**70, 1, 0, 1)])
def test_seeded_batch_sampler_follows_the_contract(seed, rank, start, epoch):
    """Every key is mix_seed(seed, epoch, rank, batch, position), as docs/contracts.md says."""
    s = SeededBatchSampler(BatchSampler(SequentialSampler(range(50)), 8, False), seed, rank, start)
    s.set_epoch(epoch)
    for b, batch in enumerate(s, start=start):
        assert [k.seed for k in batch] == [mix_seed(seed, epoch, rank, b, j) for j in range(len(batch))]
