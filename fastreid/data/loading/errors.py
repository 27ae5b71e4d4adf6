"""Errors of the data loaders: how a sample is named in them (its index and file), and how a
failed batch, a dead worker and a timeout are explained (one message for every loading mode)."""

from __future__ import annotations

import collections
import signal
from collections.abc import Iterable, Iterator, Sequence, Sized
from typing import Any, cast

from fastreid.data.loading.seeds import SampleKey, sample_index
from fastreid.utils.errors import UserError

__all__ = [
    "SampleLoadError",
    "describe_sample",
    "describe_samples",
    "timeout_error",
    "RecordingBatchSampler",
    "explain_failure",
]

# Attributes under which datasets commonly keep their (path, pid, camid, ...) entries.
_ITEM_LISTS = ("img_items", "items", "samples", "imgs", "data")


class SampleLoadError(UserError, RuntimeError):
    """Loading a sample or a batch failed: a worker raised, died or timed out.

    ``indices`` are the dataset indices involved (the failing sample first when it is known),
    ``batch`` the position of the batch in its epoch (None when unknown).
    """

    def __init__(self, message: str, indices: Sequence[int] = (), batch: int | None = None):
        super().__init__(message)
        self.indices = list(indices)
        self.batch = batch


def describe_sample(dataset: Any, item: int | SampleKey) -> str:
    """``"index 12 ('/data/0002_c1s1_000451_03.jpg')"``, or ``"index 12"`` when no file is known.

    A dataset may define ``describe_sample(index) -> str``; otherwise the first element of its
    ``img_items`` (or ``items``, ``samples``, ...) entry is taken as the file name.
    """
    index = sample_index(item)
    text = f"index {index}"
    try:
        custom = getattr(dataset, "describe_sample", None)
        if callable(custom):
            return f"{text} ({custom(index)})"
        for name in _ITEM_LISTS:
            entries = getattr(dataset, name, None)
            if (
                isinstance(entries, Sequence)
                and not isinstance(entries, (str, bytes))
                and 0 <= index < len(entries)
            ):
                entry = entries[index]
                path = entry[0] if isinstance(entry, (tuple, list)) and entry else entry
                if isinstance(path, str):
                    return f"{text} ({path!r})"
    except Exception:  # naming a sample must never hide the error being reported
        pass
    return text


def describe_samples(dataset: Any, items: Sequence[int | SampleKey], limit: int = 6) -> str:
    shown = ", ".join(describe_sample(dataset, item) for item in list(items)[:limit])
    more = len(items) - limit
    return shown + (f", ... ({more} more)" if more > 0 else "")


def timeout_error(dataset: Any, timeout: float, batch: int, items: Sequence, who: str) -> SampleLoadError:
    """The error for a batch that did not arrive within ``DATALOADER.TIMEOUT`` seconds; the same
    message for worker processes, thread workers and the main process (``who``)."""
    return SampleLoadError(
        f"no batch from {who} within DATALOADER.TIMEOUT={timeout:g} s while loading batch {batch}"
        + (f": samples {describe_samples(dataset, items)}" if items else "")
        + " (a sample that hangs, or a stalled file system?)",
        [sample_index(item) for item in items],
        batch,
    )


class RecordingBatchSampler:
    """Wraps the batch sampler; remembers the batches sent in the current iteration so that an
    error can name the samples of a failed batch."""

    def __init__(self, batch_sampler: Iterable, keep: int):
        self.batch_sampler = batch_sampler
        self.sent: collections.OrderedDict[int, list] = collections.OrderedDict()
        self._keep = keep

    def __iter__(self) -> Iterator[list]:
        sent: collections.OrderedDict[int, list] = collections.OrderedDict()
        self.sent = sent
        for k, batch in enumerate(self.batch_sampler):
            sent[k] = batch
            while len(sent) > self._keep:
                sent.popitem(last=False)
            yield batch

    def __len__(self) -> int:
        return len(cast(Sized, self.batch_sampler))  # a BatchSampler or a user's sized sampler

    def __getattr__(self, name: str) -> Any:
        if name in ("batch_sampler", "sent", "_keep"):
            raise AttributeError(name)
        return getattr(self.batch_sampler, name)


SIGNAL_HINTS = {
    "SIGKILL": " (usually the system ran out of memory: lower DATALOADER.NUM_WORKERS or the batch size)",
    "SIGBUS": " (usually /dev/shm is too small: give docker --shm-size=2g, or use DATALOADER.NUM_THREADS)",
    "SIGSEGV": " (a crash in native code, e.g. an image library)",
}


def _dead_workers_error(dataset: Any, base: Any, sent: dict, dead: list) -> SampleLoadError:
    task_info = getattr(base, "_task_info", {}) or {}
    parts: list[str] = []
    indices: list = []
    first_batch: int | None = None
    for wid, worker in dead:
        code = worker.exitcode
        if code is not None and code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            how = f"was killed by signal {name}{SIGNAL_HINTS.get(name, '')}"
        else:
            how = f"exited with code {code}"
        pending = sorted(k for k, info in task_info.items() if len(info) == 1 and info[0] == wid)
        if pending and pending[0] in sent:
            k = pending[0]
            first_batch = k if first_batch is None else min(first_batch, k)
            indices.extend(sample_index(item) for item in sent[k])
            where = f"while loading batch {k}: samples {describe_samples(dataset, sent[k])}"
        else:
            where = "(no batch assigned to it)"
        parts.append(f"worker {wid} (pid {worker.pid}) {how} {where}")
    return SampleLoadError("DataLoader worker process died: " + "; ".join(parts), indices, first_batch)


def dead_workers(base: Any) -> list:
    """``[(worker id, process)]`` of the worker processes of torch's iterator ``base`` that died."""
    return [(wid, w) for wid, w in enumerate(getattr(base, "_workers", None) or []) if not w.is_alive()]


def explain_failure(
    exc: Exception, dataset: Any, base: Any, sent: dict, delivered: int, timeout: float
) -> SampleLoadError:
    """A :class:`SampleLoadError` for ``exc``, raised by torch's iterator ``base`` after
    ``delivered`` batches: a dead worker, a timeout, or a sample that raised (found by loading the
    samples of the failed batch again, in this process)."""
    original = f"{type(exc).__name__}: {exc}"
    dead = dead_workers(base)
    if dead:
        return _dead_workers_error(dataset, base, sent, dead)
    if "timed out" in str(exc):
        k = getattr(base, "_rcvd_idx", delivered)
        worker = (getattr(base, "_task_info", {}) or {}).get(k, (None,))[0]
        return timeout_error(dataset, timeout, k, sent.get(k, []), f"worker {worker}")
    items = sent.get(delivered, [])
    if not items:
        return SampleLoadError(f"loading batch {delivered} failed: {original}", [], delivered)
    culprit = _find_failing_sample(dataset, items)
    if culprit is not None:
        item, error = culprit
        return SampleLoadError(
            f"loading sample {describe_sample(dataset, item)} (batch {delivered}) failed: "
            f"{type(error).__name__}: {error}",
            [sample_index(item)],
            delivered,
        )
    first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return SampleLoadError(
        f"loading batch {delivered} (samples {describe_samples(dataset, items)}) failed: "
        f"{type(exc).__name__}: {first_line}",
        [sample_index(item) for item in items],
        delivered,
    )


def _find_failing_sample(dataset: Any, items: list) -> tuple[Any, Exception] | None:
    """Load the samples of a failed batch again in this process to name the one that fails."""
    for item in items:
        try:
            dataset[item]
        except Exception as error:
            return item, error
    return None
