"""Thread workers: samples loaded by N daemon threads of the main process, batches in order.

No pickling and no processes, so this works on Windows, in notebooks and with datasets that hold
CUDA models. Image decoding (libjpeg, PIL) and most torch operations release the GIL, which is
what lets threads overlap.

The threads are daemon threads of this module's own small pool (not a ``ThreadPoolExecutor``,
whose threads are joined when the interpreter exits): a sample whose read never returns (a FIFO,
a hung network file system) ends the iteration with :class:`SampleLoadError` after
``DATALOADER.TIMEOUT`` seconds, and its thread is abandoned, never joined, so neither the loader
nor the process exit waits for it.

Each thread takes over the creating thread's grad mode and current CUDA device (both are
thread-local in torch). The same class runs the main process's loading when a timeout is set (``ahead=False``, one
thread): each batch is loaded in the helper thread while the caller waits at most the timeout,
nothing is loaded ahead and the loading order is that of zero workers.

Loading threads that run alongside the training step use one OpenMP thread each
(:func:`fastreid.utils.threads.keep_thread_out_of_compute_pool`): the compute pool stays the model's.

Randomness: threads share Python's, numpy's and torch's global random generators, so only keyed
datasets (``accepts_sample_keys``, see ``fastreid.data.loading.seeds``) give the same batches as
the other loading modes.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

from fastreid.data.loading.errors import SampleLoadError, describe_sample, timeout_error
from fastreid.data.loading.seeds import sample_index
from fastreid.utils.threads import keep_thread_out_of_compute_pool

__all__ = ["ThreadLoaderIter", "THREAD_NAME_PREFIX", "MAIN_THREAD_NAME"]

THREAD_NAME_PREFIX = "fastreid-thread-worker"
MAIN_THREAD_NAME = "fastreid-main-process-loader"
_STOP = None


def _thread_state() -> tuple[bool, int | None]:
    """The caller's thread-local torch state a loading thread takes over: grad mode and, when CUDA
    is already initialised, the current CUDA device (a DDP rank's ``torch.cuda.set_device``)."""
    device = torch.cuda.current_device() if torch.cuda.is_initialized() else None
    return torch.is_grad_enabled(), device


def _serve(tasks: queue.SimpleQueue, state: tuple[bool, int | None], alongside_compute: bool) -> None:
    grad, device = state
    torch.set_grad_enabled(grad)
    if device is not None:
        torch.cuda.set_device(device)
    if alongside_compute:  # loading while the model computes: stay out of its OpenMP threads
        keep_thread_out_of_compute_pool()
    while True:
        task = tasks.get()
        if task is _STOP:
            return
        future, fn, args = task
        if not future.set_running_or_notify_cancel():
            continue
        try:
            result = fn(*args)
        except BaseException as exc:
            future.set_exception(exc)
        else:
            future.set_result(result)
        del future, fn, args, task


class _DaemonPool:
    """At most ``size`` daemon threads, started as work arrives."""

    def __init__(self, size: int, name: str, alongside_compute: bool = True):
        self._size = size
        self._alongside_compute = alongside_compute
        self._name = name
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()
        self._state = _thread_state()
        self.threads: list[threading.Thread] = []

    def submit(self, fn: Callable, *args: Any) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._tasks.put((future, fn, args))
        if len(self.threads) < self._size:
            name = self._name if self._size == 1 else f"{self._name}_{len(self.threads)}"
            thread = threading.Thread(
                target=_serve,
                args=(self._tasks, self._state, self._alongside_compute),
                name=name,
                daemon=True,
            )
            thread.start()
            self.threads.append(thread)
        return future

    def shutdown(self, join_seconds: float) -> None:
        """Stop the threads once their current sample is done; wait for them at most
        ``join_seconds`` in all (0: do not wait; a stuck thread is left to itself)."""
        for _ in self.threads:
            self._tasks.put(_STOP)
        if join_seconds <= 0:
            return
        deadline = time.monotonic() + join_seconds
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))


def _fetch(dataset: Any, item: Any) -> Any:
    return dataset[item]


def _fetch_batch(dataset: Any, items: list) -> list:
    get_items = getattr(dataset, "__getitems__", None)
    return get_items(items) if callable(get_items) else [dataset[item] for item in items]


class ThreadLoaderIter(Iterator):
    """Iterate over the batches of ``batch_sampler`` loaded by ``num_threads`` threads.

    At most ``max_batches_in_flight`` batches are being loaded at once (default ``2 *
    num_threads``). With ``ahead=False`` nothing is loaded before it is asked for (the main
    process's timed loading). A sample that raises ends the iteration with
    :class:`SampleLoadError` naming its index and file; with ``timeout`` > 0 a sample taking
    longer than that many seconds does too, and the thread loading it is abandoned.
    :meth:`close` (also run on exhaustion, on error and when the iterator is garbage collected)
    cancels what is pending and lets the threads finish.
    """

    def __init__(
        self,
        dataset: Any,
        batch_sampler: Iterable[list],
        collate_fn: Callable[[list], Any],
        num_threads: int,
        *,
        max_batches_in_flight: int | None = None,
        timeout: float = 0,
        post_process: Callable[[Any], Any] | None = None,
        ahead: bool = True,
    ):
        if num_threads < 1:
            raise ValueError(f"ThreadLoaderIter: num_threads must be >= 1, got {num_threads}")
        self._dataset = dataset
        self._collate_fn = collate_fn
        self._post_process = post_process
        self._timeout = timeout if timeout and timeout > 0 else None
        self._ahead = ahead
        self._max_in_flight = max(1, max_batches_in_flight or 2 * num_threads) if ahead else 1
        self._who = "a thread worker" if ahead else "the main process (loading in a helper thread)"
        self._pool = _DaemonPool(
            num_threads, THREAD_NAME_PREFIX if ahead else MAIN_THREAD_NAME, alongside_compute=ahead
        )
        self._batches = iter(batch_sampler)
        self._in_flight: collections.deque = collections.deque()
        self._next_batch = 0
        self._exhausted = False
        self._closed = False
        if ahead:
            self._fill()

    def _fill(self) -> None:
        while not self._exhausted and len(self._in_flight) < self._max_in_flight:
            try:
                items = next(self._batches)
            except StopIteration:
                self._exhausted = True
                return
            if self._ahead:
                futures = [self._pool.submit(_fetch, self._dataset, item) for item in items]
            else:  # the main process: one task per batch, as torch's own single-process loop fetches
                futures = [self._pool.submit(_fetch_batch, self._dataset, list(items))]
            self._in_flight.append((self._next_batch, list(items), futures))
            self._next_batch += 1

    def __iter__(self) -> ThreadLoaderIter:
        return self

    def __next__(self) -> Any:
        if not self._ahead and not self._closed:
            self._fill()
        if self._closed or not self._in_flight:
            self.close()
            raise StopIteration
        batch_no, items, futures = self._in_flight.popleft()
        samples = []
        for item, future in zip(items if self._ahead else [items], futures):
            try:
                result = future.result(timeout=self._timeout)
            except concurrent.futures.TimeoutError:
                self.close(abandon=True)
                stuck = [item] if self._ahead else items
                raise timeout_error(self._dataset, self._timeout or 0, batch_no, stuck, self._who) from None
            except Exception as exc:
                if not self._ahead:
                    self.close()
                    raise  # DataLoaderX names the failing sample, as for torch's own main-process loop
                self.close()
                raise SampleLoadError(
                    f"loading sample {describe_sample(self._dataset, item)} (batch {batch_no}) failed in a thread worker: "
                    f"{type(exc).__name__}: {exc}",
                    [sample_index(item)],
                    batch_no,
                ) from exc
            if self._ahead:
                samples.append(result)
            else:
                samples = result
        if self._ahead:
            self._fill()  # keep the threads busy while this batch is collated
        batch = self._collate_fn(samples)
        return self._post_process(batch) if self._post_process is not None else batch

    def close(self, abandon: bool = False) -> None:
        """Cancel pending samples and stop the threads; safe to call more than once. Waits (a
        bounded time) for samples being loaded to finish, unless ``abandon``."""
        if self._closed:
            return
        self._closed = True
        for _, _, futures in self._in_flight:
            for future in futures:
                future.cancel()
        self._in_flight.clear()
        self._pool.shutdown(join_seconds=0 if abandon else max(5.0, self._timeout or 0))

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close(abandon=True)
