"""ImbalancedDatasetSampler (upstream's name): every class equally likely, whatever its size.

Each index is drawn with probability proportional to ``1 / (images of its class)``, with
replacement, ``size`` draws per round (the data set's length by default), for ever, sharded by
rank like ``TrainingSampler``. Unlike upstream, whose draws come from torch's global RNG (so two
runs with the same seed differ), round ``e`` comes from a private generator seeded with
``(seed, e)``: the same seed gives the same stream, and ``start`` resumes it exactly.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Optional

import numpy as np
from torch.utils.data import Sampler

from .data_sampler import epoch_rng, resolve_dist, resolve_seed, sharded_stream

__all__ = ["ImbalancedDatasetSampler"]


class ImbalancedDatasetSampler(Sampler):
    def __init__(
        self,
        data_source: Sequence[Any],
        size: Optional[int] = None,
        seed: Optional[int] = None,
        callback_get_label: Optional[Callable[[Sequence[Any], int], Any]] = None,
        *,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        start: int = 0,
    ) -> None:
        if len(data_source) == 0:
            raise ValueError("ImbalancedDatasetSampler: the dataset is empty")
        get_label = callback_get_label or (lambda dataset, idx: dataset[idx][1])
        labels = [get_label(data_source, i) for i in range(len(data_source))]
        counts = Counter(labels)
        weights = np.array([1.0 / counts[label] for label in labels])
        self.weights = weights / weights.sum()
        self._size = len(labels) if size is None else int(size)
        if self._size <= 0:
            raise ValueError(f"ImbalancedDatasetSampler: size must be positive, got {self._size}")
        self._seed = resolve_seed(seed)
        self._rank, self._world_size = resolve_dist(rank, world_size)
        if start < 0:
            raise ValueError(f"ImbalancedDatasetSampler: start must be >= 0, got {start}")
        self._start = int(start)

    def _round(self, epoch: int) -> np.ndarray:
        return epoch_rng(self._seed, epoch).choice(
            len(self.weights), size=self._size, replace=True, p=self.weights
        )

    def __iter__(self) -> Iterator[int]:
        yield from sharded_stream(self._round, self._size, self._start, self._rank, self._world_size)
