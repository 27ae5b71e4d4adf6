"""Moving batches along: the nested-tensor map, pinning, the background prefetch thread and the
CUDA side-stream prefetcher. These only carry out what the policy decided."""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, cast

import torch

from fastreid.utils.threads import keep_thread_out_of_compute_pool

__all__ = ["apply_to_tensors", "pin_batch", "BackgroundGenerator", "CudaPrefetcher"]

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# Nested batches
# --------------------------------------------------------------------------------------------
def apply_to_tensors(obj: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """Apply ``fn`` to every tensor inside nested dicts, lists and tuples (named tuples kept);
    other values pass through unchanged."""
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, Mapping):
        items = {key: apply_to_tensors(value, fn) for key, value in obj.items()}
        try:
            return cast(Any, type(obj))(items)  # the mapping's own class, when it takes a dict
        except TypeError:
            return items
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a named tuple
        return type(obj)(*(apply_to_tensors(value, fn) for value in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(apply_to_tensors(value, fn) for value in obj)
    return obj


def pin_batch(batch: Any) -> Any:
    return apply_to_tensors(batch, lambda t: t.pin_memory())


# --------------------------------------------------------------------------------------------
# BackgroundGenerator
# --------------------------------------------------------------------------------------------
_ITEM, _END, _ERROR = 0, 1, 2


def _put(q: queue.Queue, entry: tuple, stop: threading.Event) -> bool:
    while not stop.is_set():
        try:
            q.put(entry, timeout=0.05)
            return True
        except queue.Full:
            continue
    return False


def _produce(source: Iterator, q: queue.Queue, stop: threading.Event) -> None:
    # A plain function (not a method): the thread must not keep the BackgroundGenerator alive,
    # so that dropping the generator (a `break`) lets garbage collection stop the thread.
    keep_thread_out_of_compute_pool()  # it loads while the model computes
    try:
        for item in source:
            if not _put(q, (_ITEM, item), stop):
                return
        _put(q, (_END, None), stop)
    except BaseException as exc:
        _put(q, (_ERROR, exc), stop)
    finally:
        close = getattr(source, "close", None)
        if callable(close):
            with contextlib.suppress(Exception):
                close()


class BackgroundGenerator(Iterator):
    """Prefetch items of an iterator in a daemon thread into a bounded queue.

    The thread never touches CUDA (it only runs the source iterator). An exception raised by the
    source is re-raised by ``next()`` in the consumer; :meth:`close` (also run when the generator
    is exhausted or garbage collected, e.g. after ``break``) stops and joins the thread, and closes
    the source when it has a ``close()`` method.
    """

    def __init__(self, source: Iterable, max_prefetch: int = 2, name: str = "fastreid-background-loader"):
        if max_prefetch < 1:
            raise ValueError(f"BackgroundGenerator: max_prefetch must be >= 1, got {max_prefetch}")
        self._queue: queue.Queue = queue.Queue(max_prefetch)
        self._stop = threading.Event()
        self._done = False
        self._thread = threading.Thread(
            target=_produce, args=(iter(source), self._queue, self._stop), name=name, daemon=True
        )
        self._thread.start()

    def __iter__(self) -> BackgroundGenerator:
        return self

    def __next__(self) -> Any:
        if self._done:
            raise StopIteration
        while True:
            try:
                kind, value = self._queue.get(timeout=1.0)
                break
            except queue.Empty:
                if not self._thread.is_alive() and self._queue.empty():
                    self.close()
                    raise RuntimeError(
                        "BackgroundGenerator: the loader thread ended without a result"
                    ) from None
        if kind == _ITEM:
            return value
        self.close()
        if kind == _ERROR:
            raise value
        raise StopIteration

    def close(self, timeout: float = 30.0) -> None:
        """Stop the thread and wait for it (it finishes the item it is producing); idempotent."""
        self._done = True
        self._stop.set()
        thread = getattr(self, "_thread", None)
        if thread is None or thread is threading.current_thread():
            return
        while thread.is_alive():
            with contextlib.suppress(queue.Empty):  # free queued batches so that the producer is not blocked
                while True:
                    self._queue.get_nowait()
            thread.join(timeout=0.05)
            timeout -= 0.05
            if timeout <= 0:
                logger.warning("BackgroundGenerator: the loader thread did not stop; leaving it (daemon)")
                break
        with contextlib.suppress(queue.Empty):
            while True:
                self._queue.get_nowait()

    def __enter__(self) -> BackgroundGenerator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


# --------------------------------------------------------------------------------------------
# CUDA side-stream prefetch
# --------------------------------------------------------------------------------------------
class CudaPrefetcher(Iterator):
    """Copy the next batch to ``device`` on a side stream while the current one is used.

    Tensors come from pinned memory and are copied with ``non_blocking=True``; before a batch is
    handed out, the consumer's stream waits for the copy stream and every tensor is marked with
    ``record_stream`` so that the caching allocator does not reuse its memory too early.
    """

    def __init__(self, source: Iterable, device: torch.device):
        self._source = iter(source)
        self._device = device
        self._stream = torch.cuda.Stream(device=device)
        self._next: Any = None
        self._has_next = False
        self._preload()

    def _preload(self) -> None:
        try:
            batch = next(self._source)
        except StopIteration:
            self._has_next = False
            self._next = None
            return
        with torch.cuda.stream(self._stream):
            self._next = apply_to_tensors(batch, lambda t: t.to(self._device, non_blocking=True))
        self._has_next = True

    def __iter__(self) -> CudaPrefetcher:
        return self

    def __next__(self) -> Any:
        if not self._has_next:
            raise StopIteration
        current = torch.cuda.current_stream(self._device)
        current.wait_stream(self._stream)
        batch = self._next

        def _record(t: torch.Tensor) -> torch.Tensor:
            if t.is_cuda:
                t.record_stream(current)
            return t

        apply_to_tensors(batch, _record)
        self._preload()
        return batch

    def close(self) -> None:
        self._has_next = False
        self._next = None
        close = getattr(self._source, "close", None)
        if callable(close):
            close()
