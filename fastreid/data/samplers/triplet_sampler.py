"""Identity samplers: batches of P identities x K images (for triplet / circle losses).

All ranks build the same global batch of ``mini_batch_size * world_size`` indices from
``(seed, epoch)``; rank ``r`` takes the ``r``-th contiguous slice, so each rank sees whole
identities (upstream's ``reorder_index`` gives the same slices). ``start`` skips that many of
this rank's indices, for an exact resume.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from typing import Optional

import numpy as np
from torch.utils.data import Sampler

from .data_sampler import epoch_rng, resolve_dist, resolve_seed

__all__ = [
    "NaiveIdentitySampler",
    "BalancedIdentitySampler",
    "SetReWeightSampler",
    "no_index",
    "reorder_index",
]


def no_index(a: list, b: object) -> list[int]:
    """Positions of the items of ``a`` that are not ``b`` (upstream's helper)."""
    if not isinstance(a, list):
        raise TypeError(f"no_index: expected a list, got {type(a).__name__}")
    return [i for i, item in enumerate(a) if item != b]


def reorder_index(batch_indices: Sequence[int], world_size: int) -> list[int]:
    """Upstream's reordering of a global batch for ``world_size`` processes: item ``i`` of every
    rank's contiguous slice, rank after rank (the interleaving DataParallel's scatter undoes)."""
    per_rank = len(batch_indices) // world_size
    return [batch_indices[i + j * per_rank] for i in range(per_rank) for j in range(world_size)]


class _IdentitySampler(Sampler):
    def __init__(
        self,
        data_source: Sequence,
        mini_batch_size: int,
        num_instances: int,
        seed: Optional[int] = None,
        *,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        start: int = 0,
    ):
        name = type(self).__name__
        if num_instances < 1 or mini_batch_size < num_instances or mini_batch_size % num_instances:
            raise ValueError(
                f"{name}: the per-rank batch size ({mini_batch_size}) must be a positive multiple of "
                f"DATALOADER.NUM_INSTANCE ({num_instances}); adjust SOLVER.IMS_PER_BATCH or NUM_INSTANCE"
            )
        if len(data_source) == 0:
            raise ValueError(f"{name}: the training set is empty")
        if start < 0:
            raise ValueError(f"{name}: start must be >= 0, got {start}")
        self.num_instances = int(num_instances)
        self.mini_batch_size = int(mini_batch_size)
        self.num_pids_per_batch = self.mini_batch_size // self.num_instances
        self._rank, self._world_size = resolve_dist(rank, world_size)
        self.batch_size = self.mini_batch_size * self._world_size
        self._seed = resolve_seed(seed)
        self._start = int(start)

        pid_index: dict = defaultdict(list)
        pid_cams: dict = defaultdict(list)
        for index, item in enumerate(data_source):
            pid_index[item[1]].append(index)
            pid_cams[item[1]].append(item[2])
        self.pids = sorted(pid_index, key=_sort_key)
        self.pid_index = [np.asarray(pid_index[p], dtype=np.int64) for p in self.pids]
        self.pid_cams = [list(pid_cams[p]) for p in self.pids]
        self.num_identities = len(self.pids)

    def _epoch_batches(self, epoch: int) -> list[np.ndarray]:
        """The global batches (each ``batch_size`` indices) of one pass over the identities."""
        raise NotImplementedError

    def __iter__(self) -> Iterator[int]:
        skip_batches, skip_in_batch = divmod(self._start, self.mini_batch_size)
        lo = self._rank * self.mini_batch_size
        epoch = 0
        empty_epochs = 0
        while True:
            batches = self._epoch_batches(epoch)
            epoch += 1
            if not batches:
                empty_epochs += 1
                if empty_epochs > 3:
                    raise ValueError(self._too_few_message())
                continue
            if skip_batches >= len(batches):
                skip_batches -= len(batches)
                continue
            for batch in batches[skip_batches:]:
                local = batch[lo : lo + self.mini_batch_size].tolist()
                yield from local[skip_in_batch:]
                skip_in_batch = 0
            skip_batches = 0

    def _too_few_message(self) -> str:
        return (
            f"{type(self).__name__}: {self.num_identities} identities cannot fill a batch of "
            f"{self.num_pids_per_batch * self._world_size} identities x {self.num_instances} images; "
            "lower SOLVER.IMS_PER_BATCH or raise DATALOADER.NUM_INSTANCE"
        )


def _sort_key(pid):
    return (isinstance(pid, str), pid)


class NaiveIdentitySampler(_IdentitySampler):
    """Upstream's P x K sampler: draw P identities at random, K unused images of each.

    An identity with fewer than K images is padded by drawing with replacement; it leaves the
    pool once fewer than K of its images remain unused. The pass ends when fewer than P
    identities remain.
    """

    def _epoch_batches(self, epoch: int) -> list[np.ndarray]:
        rng = epoch_rng(self._seed, epoch)
        K, P = self.num_instances, self.num_pids_per_batch
        queues = []
        for idxs in self.pid_index:
            if len(idxs) < K:
                idxs = rng.choice(idxs, size=K, replace=True)
            queues.append(list(rng.permutation(idxs)))
        available = list(range(self.num_identities))
        batches, batch = [], []
        while len(available) >= P:
            chosen = [available[i] for i in rng.choice(len(available), size=P, replace=False)]
            for k in chosen:
                batch.extend(queues[k][:K])
                del queues[k][:K]
                if len(queues[k]) < K:
                    available.remove(k)
            if len(batch) == self.batch_size:
                batches.append(np.asarray(batch, dtype=np.int64))
                batch = []
        return batches


class BalancedIdentitySampler(_IdentitySampler):
    """Every identity once per pass (shuffled); for each, one random image plus K-1 others,
    preferably from other cameras than the first one (upstream's camera-balanced sampler)."""

    def _epoch_batches(self, epoch: int) -> list[np.ndarray]:
        rng = epoch_rng(self._seed, epoch)
        K = self.num_instances
        order = rng.permutation(self.num_identities)
        per_batch = self.num_pids_per_batch * self._world_size
        order = order[: len(order) - len(order) % per_batch]
        flat = []
        for k in order.tolist():
            idxs, cams = self.pid_index[k], self.pid_cams[k]
            first = int(rng.integers(len(idxs)))
            flat.append(idxs[first])
            if K == 1:
                continue
            others = [j for j in range(len(idxs)) if cams[j] != cams[first]]
            if not others:
                others = [j for j in range(len(idxs)) if j != first] or [first]
            picks = rng.choice(others, size=K - 1, replace=len(others) < K - 1)
            flat.extend(idxs[picks].tolist())
        flat_arr = np.asarray(flat, dtype=np.int64)
        return [
            flat_arr[i : i + self.batch_size]
            for i in range(0, len(flat_arr), self.batch_size)
            if i + self.batch_size <= len(flat_arr)
        ]


class SetReWeightSampler(_IdentitySampler):
    """Batches that draw a fixed number of identities from each set (camera / source).

    Items are grouped by their third field (``camid``; with multi-dataset training the camids
    carry the dataset prefix). ``set_weight[i]`` identities are drawn, with probability
    proportional to their image count, from the i-th set in sorted order, K images each; such
    rounds repeat until the global batch is full, then identity groups are shuffled (kept
    whole, so each rank still gets K images per identity).
    """

    def __init__(
        self,
        data_source: Sequence,
        mini_batch_size: int,
        num_instances: int,
        set_weight: Sequence[int],
        seed: Optional[int] = None,
        **kwargs,
    ):
        super().__init__(data_source, mini_batch_size, num_instances, seed, **kwargs)
        set_pids: dict = defaultdict(lambda: defaultdict(int))
        for item in data_source:
            set_pids[item[2]][item[1]] += 1
        self.sets = sorted(set_pids, key=_sort_key)
        weights = [int(w) for w in set_weight]
        if len(weights) != len(self.sets):
            raise ValueError(
                f"SetReWeightSampler: DATALOADER.SET_WEIGHT has {len(weights)} values but the training "
                f"set has {len(self.sets)} sets (camera ids): {self.sets[:10]}"
            )
        round_size = sum(weights) * self.num_instances
        if round_size <= 0 or self.batch_size % round_size:
            raise ValueError(
                f"SetReWeightSampler: the global batch ({self.batch_size}) must be a multiple of "
                f"sum(SET_WEIGHT) x NUM_INSTANCE ({round_size})"
            )
        self.set_weight = weights
        pid_pos = {p: i for i, p in enumerate(self.pids)}
        self._set_members = []
        for s, w in zip(self.sets, weights):
            members = [pid_pos[p] for p in sorted(set_pids[s], key=_sort_key)]
            counts = np.asarray([set_pids[s][self.pids[m]] for m in members], dtype=np.float64)
            if w > len(members):
                raise ValueError(
                    f"SetReWeightSampler: set {s!r} has {len(members)} identities, fewer than its weight {w}"
                )
            self._set_members.append((np.asarray(members), counts / counts.sum(), w))

    def _epoch_batches(self, epoch: int) -> list[np.ndarray]:
        """One batch per "epoch": every batch is drawn independently."""
        rng = epoch_rng(self._seed, epoch)
        K = self.num_instances
        groups: list[np.ndarray] = []
        while len(groups) * K < self.batch_size:
            for members, prob, w in self._set_members:
                for k in rng.choice(members, size=w, replace=False, p=prob).tolist():
                    idxs = self.pid_index[k]
                    groups.append(rng.choice(idxs, size=K, replace=len(idxs) < K))
        order = rng.permutation(len(groups))
        return [np.concatenate([groups[i] for i in order])]
