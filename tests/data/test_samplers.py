"""Samplers: P x K structure, sharding without overlap, exact resume, determinism."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from fastreid.data.samplers import (
    BalancedIdentitySampler,
    InferenceSampler,
    NaiveIdentitySampler,
    SetReWeightSampler,
    TrainingSampler,
)

# 30 identities with 3..8 images over 3 cameras
ITEMS = [(f"img{p}_{i}.jpg", f"ds_{p}", f"ds_{(p + i) % 3}") for p in range(30) for i in range(3 + p % 6)]


def take(sampler, n, skip=0):
    return list(itertools.islice(iter(sampler), skip, skip + n))


def test_training_sampler_epochs_are_permutations():
    s = TrainingSampler(10, seed=1, rank=0, world_size=1)
    stream = take(s, 30)
    for e in range(3):
        assert sorted(stream[10 * e : 10 * e + 10]) == list(range(10))
    assert stream[:10] != stream[10:20]
    assert take(TrainingSampler(10, seed=1, rank=0, world_size=1), 30) == stream
    assert take(TrainingSampler(10, seed=2, rank=0, world_size=1), 30) != stream
    assert take(TrainingSampler(5, shuffle=False, seed=0, rank=0, world_size=1), 7) == [0, 1, 2, 3, 4, 0, 1]


@pytest.mark.parametrize("world", [2, 3])
def test_training_sampler_shards_and_resume(world):
    full = take(TrainingSampler(11, seed=5, rank=0, world_size=1), 132)
    shards = [take(TrainingSampler(11, seed=5, rank=r, world_size=world), 132 // world) for r in range(world)]
    for r in range(world):
        assert shards[r] == full[r::world]
    for start in (0, 3, 10, 23):
        resumed = take(TrainingSampler(11, seed=5, rank=1, world_size=world, start=start), 10)
        assert resumed == shards[1][start : start + 10]


def _batches(stream, size):
    return [stream[i : i + size] for i in range(0, len(stream), size)]


@pytest.mark.parametrize("cls", [NaiveIdentitySampler, BalancedIdentitySampler])
def test_identity_samplers_p_by_k(cls):
    P, K = 4, 4
    s = cls(ITEMS, P * K, K, seed=0, rank=0, world_size=1)
    for batch in _batches(take(s, P * K * 20), P * K):
        pids = [ITEMS[i][1] for i in batch]
        counts = Counter(pids)
        assert len(counts) == P and set(counts.values()) == {K}
        # identities come in K-long runs
        assert all(len(set(pids[j : j + K])) == 1 for j in range(0, P * K, K))


@pytest.mark.parametrize("cls", [NaiveIdentitySampler, BalancedIdentitySampler])
def test_identity_samplers_shard_resume_and_seed(cls):
    P, K, world = 2, 4, 2
    mini = P * K
    ranks = [cls(ITEMS, mini, K, seed=7, rank=r, world_size=world) for r in range(world)]
    local = [_batches(take(s, mini * 12), mini) for s in ranks]
    for b in range(12):
        for r in range(world):
            assert set(Counter(ITEMS[i][1] for i in local[r][b]).values()) == {K}
    if cls is BalancedIdentitySampler:  # one identity order: ranks take slices of the same global batch
        full = cls(ITEMS, mini * world, K, seed=7, rank=0, world_size=1)
        for b, gb in enumerate(_batches(take(full, mini * world * 12), mini * world)):
            assert local[0][b] + local[1][b] == gb
    epoch_pids = [ITEMS[i][1] for b in range(3) for r in range(world) for i in local[r][b]]
    assert len(set(epoch_pids)) > P  # ranks do not repeat each other
    stream1 = [i for b in local[1] for i in b]
    resumed = cls(ITEMS, mini, K, seed=7, rank=1, world_size=world, start=5 * mini + 3)
    assert take(resumed, 40) == stream1[5 * mini + 3 : 5 * mini + 43]
    assert take(cls(ITEMS, mini, K, seed=8, rank=0, world_size=1), 64) != take(
        cls(ITEMS, mini, K, seed=7, rank=0, world_size=1), 64
    )


def test_balanced_prefers_other_cameras():
    s = BalancedIdentitySampler(ITEMS, 16, 4, seed=0, rank=0, world_size=1)
    spread = [
        len({ITEMS[i][2] for i in b[j : j + 4]}) for b in _batches(take(s, 160), 16) for j in (0, 4, 8, 12)
    ]
    assert sum(x >= 2 for x in spread) == len(spread)


def test_set_reweight_sampler():
    s = SetReWeightSampler(ITEMS, 16, 2, [2, 1, 1], seed=0, rank=0, world_size=1)
    stream = take(s, 16 * 10)
    for batch in _batches(stream, 16):
        pids = [ITEMS[i][1] for i in batch]
        assert all(pids[j] == pids[j + 1] for j in range(0, 16, 2))  # K=2 groups kept whole
    assert (
        take(SetReWeightSampler(ITEMS, 16, 2, [2, 1, 1], seed=0, rank=0, world_size=1, start=37), 20)
        == stream[37:57]
    )
    with pytest.raises(ValueError, match="SET_WEIGHT has 2 values"):
        SetReWeightSampler(ITEMS, 16, 2, [1, 1], seed=0, rank=0, world_size=1)
    with pytest.raises(ValueError, match="multiple of"):
        SetReWeightSampler(ITEMS, 16, 2, [2, 2, 1], seed=0, rank=0, world_size=1)


def test_inference_sampler_shards_cover_once():
    for world in (1, 2, 3, 4):
        got = [i for r in range(world) for i in InferenceSampler(10, rank=r, world_size=world)]
        assert got == list(range(10))
    assert len(InferenceSampler(10, rank=3, world_size=4)) == 1


def test_clear_errors():
    with pytest.raises(ValueError, match="multiple of"):
        NaiveIdentitySampler(ITEMS, 10, 4, seed=0, rank=0, world_size=1)
    with pytest.raises(ValueError, match="cannot fill a batch"):
        take(NaiveIdentitySampler(ITEMS[:6], 64, 4, seed=0, rank=0, world_size=1), 1)
    with pytest.raises(ValueError, match="empty"):
        TrainingSampler(0, seed=0)
    with pytest.raises(ValueError, match="rank"):
        TrainingSampler(3, seed=0, rank=2, world_size=2)


def test_upstreams_index_helpers():
    from fastreid.data.samplers.triplet_sampler import no_index, reorder_index

    assert no_index([3, 1, 3, 2], 3) == [1, 3]
    with pytest.raises(TypeError):
        no_index((1, 2), 1)
    # rank 0's slice is [0, 1, 2], rank 1's [3, 4, 5]: interleaved item by item
    assert reorder_index([0, 1, 2, 3, 4, 5], 2) == [0, 3, 1, 4, 2, 5]
    assert reorder_index(list(range(4)), 1) == [0, 1, 2, 3]
