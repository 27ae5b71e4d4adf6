"""Dynamic batching: requests that arrive together are answered by one call on all of them (one
model forward for many queries).

A :class:`BatchRunner` owns one worker thread. Callers announce an item before they prepare it
(:meth:`BatchRunner.announce`: the upload is being decoded) and submit it when it is ready; the
worker takes every submitted item (at most ``max_batch``) and, while announced items are still
being prepared, waits for them at most ``max_wait`` seconds. A lone request therefore never waits,
and under load each forward takes what queued up while the previous one ran. ``max_batch=1`` is
one item per call (batching off)."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Generic, Optional, TypeVar

__all__ = ["BatchRunner", "Ticket"]

T = TypeVar("T")
R = TypeVar("R")


class Ticket(Generic[T, R]):
    """An announced item: :meth:`submit` it once it is ready (or leave the ``announce`` block
    without submitting, when preparing it failed)."""

    def __init__(self, runner: BatchRunner[T, R]) -> None:
        self._runner = runner
        self.future: Optional[Future[R]] = None

    def submit(self, item: T) -> Future[R]:
        if self.future is not None:
            raise RuntimeError("this ticket's item was submitted already")
        self.future = self._runner._submit(item, announced=True)
        return self.future


class BatchRunner(Generic[T, R]):
    """``run(items) -> results`` (one result per item, in order) on batches of the items
    submitted from any thread; each caller gets its own result (or the batch's exception) through a
    :class:`~concurrent.futures.Future`."""

    def __init__(
        self,
        run: Callable[[list[T]], Sequence[R]],
        max_batch: int = 16,
        max_wait: float = 0.005,
        name: str = "batcher",
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be at least 1, got {max_batch}")
        if max_wait < 0:
            raise ValueError(f"max_wait must not be negative, got {max_wait}")
        self.run = run
        self.max_batch = int(max_batch)
        self.max_wait = float(max_wait)
        self.name = name
        self._items: collections.deque[tuple[T, Future[R]]] = collections.deque()
        self._announced = 0
        self._cond = threading.Condition()
        self._closed = False
        self._thread: Optional[threading.Thread] = None
        #: Sizes of the batches run so far (for the benchmark and the tests; the last 1,000).
        self.batch_sizes: collections.deque[int] = collections.deque(maxlen=1000)

    @contextmanager
    def announce(self) -> Iterator[Ticket[T, R]]:
        """A :class:`Ticket` for an item being prepared: batches wait (at most ``max_wait``) for
        the items announced and not submitted yet."""
        with self._cond:
            self._announced += 1
        ticket: Ticket[T, R] = Ticket(self)
        try:
            yield ticket
        finally:
            if ticket.future is None:  # never submitted: nobody waits for it any more
                with self._cond:
                    self._announced -= 1
                    self._cond.notify_all()

    def submit(self, item: T) -> Future[R]:
        """Queue ``item`` for the next batch (not announced before)."""
        return self._submit(item, announced=False)

    def _submit(self, item: T, announced: bool) -> Future[R]:
        future: Future[R] = Future()
        with self._cond:
            if self._closed:
                raise RuntimeError(f"{self.name} is closed")
            if announced:
                self._announced -= 1
            self._items.append((item, future))
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name=self.name, daemon=True)
                self._thread.start()
            self._cond.notify_all()
        return future

    def close(self, timeout: Optional[float] = 10.0) -> None:
        """Run what is queued, then stop the worker."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _next_batch(self) -> Optional[list[tuple[T, Future[R]]]]:
        with self._cond:
            while not self._items:
                if self._closed:
                    return None
                self._cond.wait()
            deadline = time.monotonic() + self.max_wait
            while len(self._items) < self.max_batch and self._announced > 0 and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return [self._items.popleft() for _ in range(min(self.max_batch, len(self._items)))]

    def _work(self) -> None:
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            live = [(item, f) for item, f in batch if f.set_running_or_notify_cancel()]
            if not live:
                continue
            self.batch_sizes.append(len(live))
            try:
                results = self.run([item for item, _ in live])
                if len(results) != len(live):
                    raise RuntimeError(f"{self.name}: {len(results)} results for {len(live)} items")
            except BaseException as e:  # every caller of the batch gets the error; the worker goes on
                for _, future in live:
                    future.set_exception(e)
                continue
            for (_, future), result in zip(live, results):
                future.set_result(result)
