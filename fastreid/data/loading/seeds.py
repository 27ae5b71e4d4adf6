"""Per-sample randomness: the same seed gives the same batches whatever loads them.

The random state of a sample's augmentation is derived from ``(seed, epoch, rank, batch, position)``
in the main process, where the batch sampler runs, and travels with the index to whichever worker
process or thread loads the sample. The result therefore does not depend on the number of
workers, on the start method or on the operating system.

A dataset opts in with the class attribute ``accepts_sample_keys = True``; its ``__getitem__``
then receives a :class:`SampleKey` and builds ``torch.Generator().manual_seed(key.seed)`` for its
transforms. It must still accept a plain ``int`` (use ``mix_seed(0, index)`` then).

Datasets that do not opt in (a user's dataset calling ``torch.rand`` in ``__getitem__``, or
torchvision's classic transforms) get the same batches too when the loader has a seed:
:class:`GlobalSeededDataset` seeds Python's, numpy's and torch's global generators from the
sample's seed before each ``__getitem__`` (in worker processes and in the main process, where the
trainer's own random state is saved and restored around the call). Thread workers share those
global generators, so there only the keyed form gives bit-identical batches.
"""

from __future__ import annotations

import functools
import operator
import random
from collections.abc import Callable, Iterable, Iterator, Sized
from typing import Any, NamedTuple

__all__ = [
    "SampleKey",
    "mix_seed",
    "SeededBatchSampler",
    "sample_index",
    "sample_seed",
    "GlobalSeededDataset",
    "seed_global_rngs",
]

_MASK64 = (1 << 64) - 1


class SampleKey(NamedTuple):
    """What a keyed dataset's ``__getitem__`` receives: the sample index and its own seed."""

    index: int  # type: ignore[assignment]  # the field shadows tuple.index on purpose (public name)
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


def _as_index(index: Any) -> Any:
    """An integer index as a Python int (numpy and 0-d tensor ints too); any other key (a file
    name, a tuple) as it is, for datasets indexed by something else."""
    try:
        return operator.index(index)
    except TypeError:
        return index


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
            yield [SampleKey(_as_index(index), _splitmix64(state ^ j) >> 1) for j, index in enumerate(batch)]

    def __len__(self) -> int:
        if not isinstance(self.batch_sampler, Sized):
            raise TypeError(f"{type(self.batch_sampler).__name__} has no len() (an infinite sampler?)")
        return len(self.batch_sampler)


def seed_global_rngs(seed: int) -> None:
    """Seed Python's ``random``, numpy's legacy global generator and torch's CPU generator.

    CUDA generators are left alone (``torch.manual_seed`` would seed every device, slowly, and
    change the trainer's GPU random state): data loading runs on the CPU.
    """
    _, torch = _numpy_and_torch()
    random.seed(seed)
    _numpy_seeder()(seed & 0xFFFFFFFF)
    torch.default_generator.manual_seed(seed)


@functools.lru_cache(maxsize=1)
def _numpy_and_torch() -> tuple[Any, Any]:
    """numpy and torch, imported when first needed: importing this module loads neither (worker
    processes and user datasets import it; see ``fastreid.data``'s docstring)."""
    import numpy  # this module stays light: see the docstring
    import torch  # as numpy

    return numpy, torch


@functools.lru_cache(maxsize=1)
def _numpy_seeder() -> Callable[[int], None]:
    """``np.random.seed`` for a 32-bit int; the legacy generator's own seeding function (half the
    cost: no argument checks) where numpy has it."""
    np, _ = _numpy_and_torch()
    bit_generator = getattr(np.random.mtrand._rand, "_bit_generator", None)
    legacy = getattr(bit_generator, "_legacy_seeding", None)
    return legacy if callable(legacy) else np.random.seed


class _SavedGlobalRngs:
    """Saves the three global generators on enter and restores them on exit."""

    __slots__ = ("_python", "_numpy", "_torch")

    def __enter__(self) -> None:
        np, torch = _numpy_and_torch()
        self._python = random.getstate()
        self._numpy = np.random.get_state(legacy=False)
        self._torch = torch.default_generator.get_state()

    def __exit__(self, *exc: object) -> None:
        np, torch = _numpy_and_torch()
        random.setstate(self._python)
        np.random.set_state(self._numpy)
        torch.default_generator.set_state(self._torch)


class GlobalSeededDataset:
    """A map-style dataset seen through :class:`SampleKey` items: before ``dataset[index]`` the
    global generators are seeded from the key's seed.

    ``restore=True`` (the main process) puts the caller's random state back afterwards, so that the
    trainer's own draws do not depend on how many samples were loaded in its process; torch's
    loaders fetch whole batches through ``__getitems__``, so the state is saved and restored once
    per batch (saving numpy's state alone costs more than seeding all three generators). Every
    other attribute is the wrapped dataset's (``len()``, ``img_items``, ...).
    """

    accepts_sample_keys = True

    def __init__(self, dataset: Any, restore: bool = True):
        self.dataset = dataset
        self.restore = restore

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, item: int | SampleKey) -> Any:
        index = sample_index(item)
        if not self.restore:
            seed_global_rngs(sample_seed(item))
            return self.dataset[index]
        with _SavedGlobalRngs():
            seed_global_rngs(sample_seed(item))
            return self.dataset[index]

    def __getitems__(self, items: list) -> list:
        """The samples of a batch (torch's fetchers call this when it exists)."""
        dataset = self.dataset
        if not self.restore:
            out = []
            for item in items:
                seed_global_rngs(sample_seed(item))
                out.append(dataset[sample_index(item)])
            return out
        with _SavedGlobalRngs():
            out = []
            for item in items:
                seed_global_rngs(sample_seed(item))
                out.append(dataset[sample_index(item)])
            return out

    def __getattr__(self, name: str) -> Any:
        if name in ("dataset", "restore") or name.startswith("__"):
            raise AttributeError(name)  # during unpickling, before __init__ state is set
        return getattr(self.dataset, name)

    def __getstate__(self) -> dict:
        # a worker process never restores: its random state belongs to no one else
        return {"dataset": self.dataset, "restore": False}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
