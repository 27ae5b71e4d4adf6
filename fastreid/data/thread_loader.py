"""Thread workers: samples loaded by N threads of the main process, batches returned in order.

No pickling and no processes, so this works on Windows, in notebooks and with datasets that hold
CUDA models. Image decoding (libjpeg, PIL) and most torch operations release the GIL, which is
what lets threads overlap.

Randomness: threads share Python's, numpy's and torch's global random generators, so only keyed
datasets (``accepts_sample_keys``, see ``fastreid.data.sample_seed``) give the same batches as
the other loading modes.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from fastreid.data.loader_errors import SampleLoadError, describe_sample
from fastreid.data.sample_seed import sample_index

__all__ = ["ThreadLoaderIter"]

THREAD_NAME_PREFIX = "fastreid-thread-worker"


def _fetch(dataset: Any, item: Any) -> Any:
    return dataset[item]


class ThreadLoaderIter(Iterator):
    """Iterate over the batches of ``batch_sampler`` loaded by ``num_threads`` threads.

    At most ``max_batches_in_flight`` batches are being loaded at once. A sample that raises ends
    the iteration with :class:`SampleLoadError` naming its index and file; with ``timeout`` > 0
    a sample taking longer than that many seconds does too. :meth:`close` (also run on exhaustion,
    on error and when the iterator is garbage collected) cancels what is pending and joins the
    threads.
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
    ):
        if num_threads < 1:
            raise ValueError(f"ThreadLoaderIter: num_threads must be >= 1, got {num_threads}")
        self._dataset = dataset
        self._collate_fn = collate_fn
        self._post_process = post_process
        self._timeout = timeout if timeout and timeout > 0 else None
        self._max_in_flight = max(1, max_batches_in_flight or 2 * num_threads)
        self._executor = concurrent.futures.ThreadPoolExecutor(num_threads, thread_name_prefix=THREAD_NAME_PREFIX)
        self._batches = iter(batch_sampler)
        self._in_flight: collections.deque = collections.deque()
        self._next_batch = 0
        self._exhausted = False
        self._closed = False
        self._fill()

    def _fill(self) -> None:
        while not self._exhausted and len(self._in_flight) < self._max_in_flight:
            try:
                items = next(self._batches)
            except StopIteration:
                self._exhausted = True
                return
            futures = [self._executor.submit(_fetch, self._dataset, item) for item in items]
            self._in_flight.append((self._next_batch, list(items), futures))
            self._next_batch += 1

    def __iter__(self) -> ThreadLoaderIter:
        return self

    def __next__(self) -> Any:
        if self._closed or not self._in_flight:
            self.close()
            raise StopIteration
        batch_no, items, futures = self._in_flight.popleft()
        samples = []
        for item, future in zip(items, futures):
            try:
                samples.append(future.result(timeout=self._timeout))
            except concurrent.futures.TimeoutError:
                self.close()
                raise SampleLoadError(
                    f"thread worker: sample {describe_sample(self._dataset, item)} of batch {batch_no} took more "
                    f"than DATALOADER.TIMEOUT={self._timeout:g} s to load (a stalled file system?)",
                    [sample_index(item)],
                    batch_no,
                ) from None
            except Exception as exc:
                self.close()
                raise SampleLoadError(
                    f"loading sample {describe_sample(self._dataset, item)} (batch {batch_no}) failed in a "
                    f"thread worker: {type(exc).__name__}: {exc}",
                    [sample_index(item)],
                    batch_no,
                ) from exc
        self._fill()  # keep the threads busy while this batch is collated
        batch = self._collate_fn(samples)
        return self._post_process(batch) if self._post_process is not None else batch

    def close(self) -> None:
        """Cancel pending samples and join the threads; safe to call more than once."""
        if self._closed:
            return
        self._closed = True
        for _, _, futures in self._in_flight:
            for future in futures:
                future.cancel()
        self._in_flight.clear()
        self._executor.shutdown(wait=True, cancel_futures=True)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()
