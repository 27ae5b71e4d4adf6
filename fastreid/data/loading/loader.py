"""``DataLoaderX``: a ``torch.utils.data.DataLoader`` that carries out a :class:`LoaderDecision`.

The decision (from the policy, ``fastreid.data.loading.rules``, or for explicit arguments from
``fastreid.data.loading.explicit``) says how many worker processes or threads, which start method, whether
to pin memory, run a background thread, check the ``__main__`` guard, apply the timeout in the
main process and seed the global random generators per sample. This class decides none of it.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils.data import BatchSampler, DataLoader, IterableDataset, RandomSampler, SequentialSampler

from fastreid.data.loading.errors import RecordingBatchSampler, SampleLoadError, dead_workers, explain_failure
from fastreid.data.loading.explicit import explicit_decision
from fastreid.data.loading.main_guard import find_unguarded_main_call, unguarded_main_message
from fastreid.data.loading.prefetch import BackgroundGenerator, CudaPrefetcher, pin_batch
from fastreid.data.loading.request import LoaderDecision
from fastreid.data.loading.seeds import GlobalSeededDataset, SeededBatchSampler, mix_seed
from fastreid.data.loading.threads import ThreadLoaderIter
from fastreid.data.loading.workers import (
    WorkerInit,
    install_worker_death_guard,
    loader_next,
    pending_worker_death,
)

__all__ = ["DataLoaderX"]


class DataLoaderX(DataLoader):
    """``torch.utils.data.DataLoader`` with a target device, guarded against platform trouble.

    Extra arguments (keyword only):

    - ``device``: where batches go. Only when it is a CUDA device and CUDA is available are
      batches copied ahead on a side stream (from pinned memory, ``non_blocking``, with
      ``record_stream``); otherwise batches are returned as loaded: no stream, no copy.
    - ``background``: prefetch batches in a :class:`BackgroundGenerator` thread: True, False or
      "auto" (on with zero worker processes and zero threads feeding a CUDA model).
    - ``num_threads``: load samples with this many threads of the main process instead of worker
      processes (requires ``num_workers=0``), see ``fastreid.data.loading.threads``.
    - ``seed``, ``rank``, ``start_batch``: the batch sampler is wrapped in
      :class:`SeededBatchSampler` so that each sample has its own seed (same batches whatever
      loads them): a dataset with ``accepts_sample_keys = True`` receives it; for any other
      dataset, when ``seed`` is given, the global random generators are seeded from it before
      each sample (not with thread workers). ``seed`` also seeds the loader's generator
      (shuffling, worker seeds); ``seed=None`` draws one from torch's global generator.
    - ``decision``: a :class:`LoaderDecision` from the policy; it replaces ``num_workers``,
      ``num_threads``, ``pin_memory``, ``timeout``, ``multiprocessing_context``,
      ``prefetch_factor``, ``persistent_workers`` and ``background``.

    Upstream FastReID's call ``DataLoaderX(local_rank, dataset=..., ...)`` works: the rank names
    the CUDA device batches go to.

    Worker processes run :class:`WorkerInit`. An error in a worker, a worker that dies and a
    timeout (``timeout`` > 0, in every loading mode) end the iteration with
    :class:`SampleLoadError` naming the batch, the samples and their files. ``shutdown()`` stops
    background threads and persistent workers and may be called any number of times.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        if args and isinstance(args[0], int) and not isinstance(args[0], bool) and "dataset" in kwargs:
            local_rank, args = args[0], args[1:]  # upstream: DataLoaderX(local_rank, dataset=..., ...)
            kwargs.setdefault("device", f"cuda:{local_rank}")
            kwargs.setdefault("rank", 0)
        self._setup(*args, **kwargs)

    def _setup(
        self,
        dataset: Any,
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler: Any = None,
        batch_sampler: Any = None,
        num_workers: int = 0,
        collate_fn: Callable | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context: Any = None,
        generator: torch.Generator | None = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
        device: str | torch.device | None = None,
        background: bool | str = "auto",
        num_threads: int = 0,
        seed: int | None = None,
        rank: int = 0,
        start_batch: int = 0,
        decision: LoaderDecision | None = None,
        **kwargs: Any,
    ) -> None:
        if decision is None:
            decision = explicit_decision(
                dataset=dataset,
                num_workers=num_workers,
                num_threads=num_threads,
                multiprocessing_context=multiprocessing_context,
                pin_memory=pin_memory,
                persistent_workers=persistent_workers,
                prefetch_factor=prefetch_factor,
                background=background,
                timeout=timeout,
                device=device,
                seeded=seed is not None,
            )
        keyed = bool(getattr(dataset, "accepts_sample_keys", False))
        auto_batching = not isinstance(dataset, IterableDataset) and (
            batch_sampler is not None or batch_size is not None
        )
        if decision.num_threads > 0 and not auto_batching:
            raise ValueError(
                "DataLoaderX: thread workers need a map-style dataset loaded in batches "
                "(batch_size or batch_sampler); use num_threads=0 here"
            )
        global_rngs = decision.seed_global_rngs and auto_batching and not keyed
        user_generator = generator
        if seed is None and (keyed or generator is None):
            seed = int(torch.empty((), dtype=torch.int64).random_().item())
        if generator is None:
            assert seed is not None  # drawn just above when no generator was given
            generator = torch.Generator().manual_seed(mix_seed(seed, rank, 0x6C6F61646572))
        if auto_batching:
            if batch_sampler is None:
                batch_sampler = _batch_sampler(
                    dataset, batch_size, shuffle, sampler, drop_last, user_generator, seed, rank
                )
                batch_size, shuffle, sampler, drop_last = 1, None, None, False
            if keyed or global_rngs:
                assert seed is not None, "seeding the global RNGs needs a seed or no generator"
                batch_sampler = SeededBatchSampler(batch_sampler, seed, rank=rank, start_batch=start_batch)
            batch_sampler = RecordingBatchSampler(batch_sampler, keep=256)
        if global_rngs:
            dataset = GlobalSeededDataset(dataset)

        workers = decision.num_workers
        with_processes = workers > 0
        timed_main = decision.main_process_timeout and auto_batching
        super().__init__(
            dataset,
            batch_size=batch_size,
            shuffle=shuffle,
            sampler=sampler,
            batch_sampler=batch_sampler,
            num_workers=workers,
            collate_fn=collate_fn,
            pin_memory=decision.pin_memory and decision.num_threads == 0 and not timed_main,
            drop_last=drop_last,
            timeout=decision.timeout if with_processes else 0,
            worker_init_fn=WorkerInit(worker_init_fn) if with_processes else worker_init_fn,
            multiprocessing_context=decision.mp_context if with_processes else None,
            generator=generator,
            prefetch_factor=decision.prefetch_factor if with_processes else None,
            persistent_workers=decision.persistent_workers and with_processes,
            **kwargs,
        )
        self.decision = decision
        self.device = torch.device(device) if device is not None else None
        self.num_threads = decision.num_threads
        self.seed = seed
        self.keyed = (keyed or global_rngs) and auto_batching
        self.background = decision.background
        self._timed_main = timed_main
        self._pipelines: weakref.WeakSet = weakref.WeakSet()

    # -- iteration ---------------------------------------------------------------------------
    def __iter__(self) -> Iterator:  # type: ignore[override]  # our pipeline, not torch's iterator class
        if self.persistent_workers:
            self._close_pipelines()  # they share torch's persistent iterator with the new epoch
        if self.decision.main_guard:
            where = find_unguarded_main_call()
            if where is not None:
                context = self.multiprocessing_context
                method = (
                    context.get_start_method() if context is not None else multiprocessing.get_start_method()
                )
                raise RuntimeError(unguarded_main_message(where, method, fallback=None))
        pipeline: Iterator = self._batches()
        if self.background:
            pipeline = BackgroundGenerator(pipeline, max_prefetch=max(2, self.prefetch_factor or 2))
        if self.decision.cuda_prefetch:
            assert self.device is not None  # decided only for a CUDA device
            pipeline = CudaPrefetcher(pipeline, self.device)
        self._pipelines.add(pipeline)
        return pipeline

    def _base_iterator(self) -> Iterator:
        pin = pin_batch if self.decision.pin_memory else None
        if self.num_threads > 0 or self._timed_main:
            assert self.batch_sampler is not None  # both need batches (checked in __init__)
            return ThreadLoaderIter(
                self.dataset,
                self.batch_sampler,
                self.collate_fn,
                max(1, self.num_threads),
                max_batches_in_flight=self.decision.thread_prefetch,
                timeout=self.decision.timeout,
                post_process=pin,
                ahead=self.num_threads > 0,
            )
        if isinstance(self.worker_init_fn, WorkerInit):
            self.worker_init_fn.started_by_main_thread = threading.current_thread() is threading.main_thread()
        base = super().__iter__()
        if self.num_workers > 0:
            install_worker_death_guard()
        return base

    def _batches(self) -> Iterator:
        base = self._base_iterator()
        delivered = 0
        failed = timed_out = False
        try:
            while True:
                try:
                    death = pending_worker_death()
                    if death is not None and dead_workers(base):
                        raise death
                    with loader_next():
                        batch = next(base)
                except StopIteration:
                    return
                except SampleLoadError:
                    failed = True
                    raise
                except Exception as exc:
                    failed = True
                    error = explain_failure(
                        exc, self.dataset, base, self._sent_batches(), delivered, self.decision.timeout
                    )
                    timed_out = "DATALOADER.TIMEOUT" in str(error)
                    raise error from exc
                delivered += 1
                yield batch
        finally:
            if timed_out:  # a worker stuck in a read would hold torch's graceful shutdown for seconds
                _terminate_workers(base)
            if isinstance(base, ThreadLoaderIter):
                base.close()
            elif base is getattr(self, "_iterator", None):
                if failed:  # a persistent iterator after an error cannot be reset safely
                    self._drop_persistent_iterator()
            else:
                shutdown = getattr(base, "_shutdown_workers", None)
                if callable(shutdown):
                    shutdown()

    def _sent_batches(self) -> dict[int, list]:
        sampler = self.batch_sampler
        return sampler.sent if isinstance(sampler, RecordingBatchSampler) else {}

    # -- shutdown ----------------------------------------------------------------------------
    def _close_pipelines(self) -> None:
        for pipeline in list(self._pipelines):
            close = getattr(pipeline, "close", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    close()
        self._pipelines = weakref.WeakSet()

    def _drop_persistent_iterator(self) -> None:
        iterator = getattr(self, "_iterator", None)
        self._iterator = None
        shutdown = getattr(iterator, "_shutdown_workers", None)
        if callable(shutdown):
            with contextlib.suppress(Exception):
                shutdown()

    def shutdown(self) -> None:
        """Stop background threads, thread workers and persistent worker processes; idempotent.
        The loader can be iterated again afterwards (workers are started anew)."""
        self._close_pipelines()
        self._drop_persistent_iterator()


def _terminate_workers(base: Any) -> None:
    for worker in getattr(base, "_workers", None) or []:
        with contextlib.suppress(Exception):
            if worker.is_alive():
                worker.terminate()


def _batch_sampler(
    dataset: Any,
    batch_size: int | None,
    shuffle: bool | None,
    sampler: Any,
    drop_last: bool,
    user_generator: torch.Generator | None,
    seed: int | None,
    rank: int,
) -> BatchSampler:
    if sampler is None and shuffle:
        # its own generator: torch draws worker seeds from the loader's generator a different
        # number of times per mode, and the order of the samples must not depend on that
        order = user_generator
        if order is None:
            assert seed is not None  # the loader draws one when no generator was given
            order = torch.Generator().manual_seed(mix_seed(seed, rank, 0x6F72646572))
        sampler = RandomSampler(dataset, generator=order)
    elif sampler is None:
        sampler = SequentialSampler(dataset)
    elif shuffle:
        raise ValueError("DataLoaderX: sampler option is mutually exclusive with shuffle")
    assert batch_size is not None  # automatic batching without a batch sampler means a batch size
    return BatchSampler(sampler, batch_size, drop_last)
