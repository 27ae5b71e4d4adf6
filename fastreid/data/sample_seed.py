"""Per-sample randomness: the same seed gives the same batches whatever loads them.

The random state of a sample's augmentation is derived from ``(seed, epoch, rank, batch, position)``
in the main process, where the batch sampler runs, and travels with the index to whichever worker
process or thread loads the sample. The result therefore does not depend on the number of
workers, on the start method or on the operating system.

A dataset opts in with the class attribute ``accepts_sample_keys = True``; its ``__getitem__``
then receives a :class:`SampleKey` and builds ``torch.Generator().manual_seed(key.seed)`` for its
transforms. It must still accept a plain ``int`` (use ``mix_seed(0, index)`` then).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sized
from typing import NamedTuple

__all__ = ["SampleKey", "mix_seed", "SeededBatchSampler", "sample_index", "sample_seed"]

_MASK64 = (1 << 64) - 1


class SampleKey(NamedTuple):
    """What a keyed dataset's ``__getitem__`` receives: the sample index and its own seed."""

    index: int
    seed: int


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def mix_seed(*parts: int) -> int:
    """Mix integers into one deterministic 63-bit seed (a splitmix64 chain).

    The order of the parts matters and negative numbers are allowed (taken modulo 2**64). The
    result is non-negative and below 2**63, so ``torch.Generator.manual_seed``,
    ``numpy.random.default_rng`` and ``random.Random`` all accept it.
    """
    state = _splitmix64(len(parts))
    for part in parts:
        state = _splitmix64(state ^ (int(part) & _MASK64))
    return state >> 1


def sample_index(item: int | SampleKey) -> int:
    """The dataset index of ``item`` (a plain index or a :class:`SampleKey`)."""
    return item.index if isinstance(item, SampleKey) else int(item)


def sample_seed(item: int | SampleKey) -> int:
    """The augmentation seed of ``item``: the key's seed, or ``mix_seed(0, index)`` for a plain index."""
    return item.seed if isinstance(item, SampleKey) else mix_seed(0, int(item))


class SeededBatchSampler:
    """Wrap a batch sampler so that it yields lists of :class:`SampleKey`.

    The j-th sample of batch ``b`` of epoch ``e`` gets ``mix_seed(seed, e, rank, b, j)``, where
    ``b`` counts the batches of an iteration starting from ``start_batch`` (the position a resumed
    training run starts at). The epoch is 0 for the first iteration and increments at each
    following one; ``set_epoch(e)`` makes the next iteration use epoch ``e`` (and is forwarded to
    the wrapped sampler when it has ``set_epoch``).

    An iteration claims its epoch when it produces its first batch, not when ``iter()`` is called:
    torch's DataLoader calls ``iter()`` on its batch sampler once with zero workers but twice
    (discarding the first iterator) with worker processes, and the epochs must not depend on that.
    """

    def __init__(self, batch_sampler: Iterable, seed: int, rank: int = 0, start_batch: int = 0):
        if isinstance(batch_sampler, SeededBatchSampler):
            raise TypeError("SeededBatchSampler: the batch sampler is already seeded; do not wrap it twice")
        if start_batch < 0:
            raise ValueError(f"SeededBatchSampler: start_batch must be >= 0, got {start_batch}")
        self.batch_sampler = batch_sampler
        self.seed = int(seed)
        self.rank = int(rank)
        self.start_batch = int(start_batch)
        self._next_epoch = 0

    @property
    def epoch(self) -> int:
        """The epoch the next ``__iter__`` will use."""
        return self._next_epoch

    def set_epoch(self, epoch: int) -> None:
        self._next_epoch = int(epoch)
        forward = getattr(self.batch_sampler, "set_epoch", None)
        if callable(forward):
            forward(epoch)

    def __iter__(self) -> Iterator[list[SampleKey]]:
        epoch = self._next_epoch  # a generator: this line runs at the first next(), see the class doc
        self._next_epoch += 1
        # mix_seed(seed, epoch, rank, b, j) with the chain over the first four parts done once per batch
        head = _splitmix64(5)
        for part in (self.seed, epoch, self.rank):
            head = _splitmix64(head ^ (int(part) & _MASK64))
        for b, batch in enumerate(self.batch_sampler, start=self.start_batch):
            state = _splitmix64(head ^ (b & _MASK64))
            yield [SampleKey(int(index), _splitmix64(state ^ j) >> 1) for j, index in enumerate(batch)]

    def __len__(self) -> int:
        if not isinstance(self.batch_sampler, Sized):
            raise TypeError(f"{type(self.batch_sampler).__name__} has no len() (an infinite sampler?)")
        return len(self.batch_sampler)
