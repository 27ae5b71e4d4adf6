"""Index samplers: an infinite shuffled stream for training and ordered shards for inference.

Samplers run in the main process (the batch sampler of the loader), so their output does not
depend on the number of workers. Randomness comes from a private ``numpy.random.Generator``
seeded from ``(seed, epoch)``; the global RNGs are never touched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Optional

import numpy as np
from torch.utils.data import Sampler

from fastreid.data.loading.seeds import mix_seed
from fastreid.utils import comm

__all__ = ["TrainingSampler", "InferenceSampler", "resolve_dist", "resolve_seed", "sharded_stream"]


def resolve_dist(rank: Optional[int], world_size: Optional[int]) -> tuple[int, int]:
    """``(rank, world_size)``, taken from ``fastreid.utils.comm`` where not given."""
    world_size = comm.get_world_size() if world_size is None else int(world_size)
    rank = comm.get_rank() if rank is None else int(rank)
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is not in 0..{world_size - 1} (world size {world_size})")
    return rank, world_size


def resolve_seed(seed: Optional[int]) -> int:
    """``seed``, or a random seed shared by all ranks when None."""
    return int(comm.shared_random_seed() if seed is None else seed)


def epoch_rng(seed: int, epoch: int) -> np.random.Generator:
    return np.random.default_rng(mix_seed(seed, epoch))


def sharded_stream(
    epoch_order: Callable[[int], np.ndarray], size: int, start: int, rank: int, world_size: int
) -> Iterator[int]:
    """``epoch_order(0) + epoch_order(1) + ...`` (each ``size`` long), rank ``rank``'s share
    (elements ``rank, rank + world_size, ...``), from this rank's ``start``-th element on."""
    pos = start * world_size + rank
    while True:
        epoch, offset = divmod(pos, size)
        chunk = epoch_order(epoch)[offset::world_size]
        yield from chunk.tolist()
        pos += len(chunk) * world_size


class TrainingSampler(Sampler):
    """Infinite stream ``perm_0 + perm_1 + ...`` (or ``range(size)`` repeated), sharded by rank.

    Rank ``r`` of ``W`` yields elements ``r, r + W, r + 2W, ...`` of the stream; ``start`` skips
    that many of this rank's elements (``start_iter * per-rank batch size`` resumes a run
    exactly), at no cost: each epoch's permutation is a function of ``(seed, epoch)``.
    """

    def __init__(
        self,
        size: int,
        shuffle: bool = True,
        seed: Optional[int] = None,
        *,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        start: int = 0,
    ):
        if size <= 0:
            raise ValueError(f"TrainingSampler: the dataset is empty (size {size})")
        if start < 0:
            raise ValueError(f"TrainingSampler: start must be >= 0, got {start}")
        self._size = int(size)
        self._shuffle = shuffle
        self._seed = resolve_seed(seed)
        self._rank, self._world_size = resolve_dist(rank, world_size)
        self._start = int(start)

    def _epoch_order(self, epoch: int) -> np.ndarray:
        if self._shuffle:
            return epoch_rng(self._seed, epoch).permutation(self._size)
        return np.arange(self._size)

    def __iter__(self) -> Iterator[int]:
        yield from sharded_stream(self._epoch_order, self._size, self._start, self._rank, self._world_size)


class InferenceSampler(Sampler):
    """Every index exactly once, in order; rank ``r`` gets the ``r``-th contiguous shard.

    Shards differ in length by at most one shard size when ``size`` is not divisible by the
    world size (the last ranks get fewer or none), as upstream.
    """

    def __init__(self, size: int, *, rank: Optional[int] = None, world_size: Optional[int] = None):
        if size <= 0:
            raise ValueError(f"InferenceSampler: the dataset is empty (size {size})")
        self._size = int(size)
        self._rank, self._world_size = resolve_dist(rank, world_size)
        shard = (self._size - 1) // self._world_size + 1
        begin = min(shard * self._rank, self._size)
        end = min(shard * (self._rank + 1), self._size)
        self._local_indices = range(begin, end)

    def __iter__(self) -> Iterator[int]:
        yield from self._local_indices

    def __len__(self) -> int:
        return len(self._local_indices)
