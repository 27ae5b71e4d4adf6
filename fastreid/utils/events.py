"""Training metrics: an event storage filled by the trainer and hooks, and writers that print
it on the console, append it to a JSON-lines file or send it to TensorBoard.

``metrics.json`` (:class:`JSONWriter`) holds one JSON object per line: the scalars of an iteration
and each evaluation's metrics at its iteration. A resumed run first drops the lines of the
iterations it trains again (those a run killed between checkpoints had written,
:meth:`JSONWriter.discard_from`); an evaluation that runs again after a resume (it was due at the
checkpoint the run resumed from) appends a later line for its iteration. :func:`read_metrics` is
the one reading of the file: one record per iteration, a later value replacing an earlier one.
"""

from __future__ import annotations

import datetime
import json
import logging
import math
import os
import time
from collections import defaultdict
from collections.abc import Collection
from contextlib import contextmanager
from typing import Any, Optional

import torch
from fvcore.common.history_buffer import HistoryBuffer

from fastreid.utils.atomic import atomic_write

__all__ = [
    "CommonMetricPrinter",
    "EventStorage",
    "EventWriter",
    "JSONWriter",
    "TensorboardXWriter",
    "get_event_storage",
    "read_metrics",
]

_CURRENT_STORAGE_STACK: list[EventStorage] = []


def get_event_storage() -> EventStorage:
    """The storage of the innermost ``with EventStorage(...)`` block."""
    if not _CURRENT_STORAGE_STACK:
        raise RuntimeError("get_event_storage() has to be called inside a 'with EventStorage(...)' block")
    return _CURRENT_STORAGE_STACK[-1]


class EventStorage:
    """Scalars per iteration. ``put_scalar`` records a value at the current ``iter``; writers
    read ``latest()`` / ``history(name)``; ``smoothing_hint`` tells them whether to average over
    a window (losses, times) or show the latest value (lr, metrics)."""

    def __init__(self, start_iter: int = 0) -> None:
        self._history: dict[str, HistoryBuffer] = defaultdict(HistoryBuffer)
        self._smoothing_hints: dict[str, bool] = {}
        self._latest_scalars: dict[str, tuple[float, int]] = {}
        self._iter = start_iter
        self._current_prefix = ""

    def put_scalar(self, name: str, value: Any, smoothing_hint: bool = True) -> None:
        name = self._current_prefix + name
        value = float(value.item() if isinstance(value, torch.Tensor) else value)
        self._history[name].update(value, self._iter)
        self._latest_scalars[name] = (value, self._iter)
        existing = self._smoothing_hints.get(name)
        if existing is not None and existing != smoothing_hint:
            raise ValueError(f"Scalar {name} was put with a different smoothing_hint before")
        self._smoothing_hints[name] = smoothing_hint

    def put_scalars(self, *, smoothing_hint: bool = True, **kwargs: Any) -> None:
        for k, v in kwargs.items():
            self.put_scalar(k, v, smoothing_hint=smoothing_hint)

    def history(self, name: str) -> HistoryBuffer:
        if name not in self._history:
            raise KeyError(f"No history metric available for {name}!")
        return self._history[name]

    def histories(self) -> dict[str, HistoryBuffer]:
        return dict(self._history)

    def restore_history(
        self, name: str, values: list[tuple[float, int]], smoothing_hint: bool = True
    ) -> None:
        """Put back the recent ``(value, iteration)`` history of ``name`` saved by an interrupted
        run, so that the windowed medians of the resumed run are the unbroken run's; nothing is
        marked as new to write."""
        history = self._history[name]
        for value, itr in values:
            history.update(float(value), int(itr))
        self._smoothing_hints.setdefault(name, smoothing_hint)

    def latest(self) -> dict[str, tuple[float, int]]:
        """``{name: (latest value, iteration it was put at)}``."""
        return dict(self._latest_scalars)

    def latest_with_smoothing_hint(self, window_size: int = 20) -> dict[str, tuple[float, int]]:
        """Like :meth:`latest`, with the median over ``window_size`` for smoothed scalars."""
        result = {}
        for k, (v, itr) in self._latest_scalars.items():
            value = self._history[k].median(window_size) if self._smoothing_hints[k] else v
            result[k] = (value, itr)
        return result

    def smoothing_hints(self) -> dict[str, bool]:
        return dict(self._smoothing_hints)

    def step(self) -> None:
        self._iter += 1

    @property
    def iter(self) -> int:
        return self._iter

    @iter.setter
    def iter(self, value: int) -> None:
        self._iter = int(value)

    @contextmanager
    def name_scope(self, name: str):
        """Prefix the names of scalars put inside the block with ``name/``."""
        old = self._current_prefix
        self._current_prefix = name.rstrip("/") + "/"
        try:
            yield
        finally:
            self._current_prefix = old

    def __enter__(self) -> EventStorage:
        _CURRENT_STORAGE_STACK.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        assert _CURRENT_STORAGE_STACK[-1] is self
        _CURRENT_STORAGE_STACK.pop()


class EventWriter:
    """Base class of writers run by ``PeriodicWriter``."""

    def write(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


def _new_scalars(
    storage: EventStorage, written: dict[str, int], window_size: int
) -> dict[int, dict[str, float]]:
    """Scalars not written yet, by iteration. ``written`` maps each name to the last iteration
    written for it, so values put later at an iteration already written (an evaluation at the end
    of an epoch, after that iteration's losses went out) are not lost."""
    by_iter: dict[int, dict[str, float]] = defaultdict(dict)
    for k, (v, itr) in storage.latest_with_smoothing_hint(window_size).items():
        if itr > written.get(k, -1):
            by_iter[itr][k] = v
            written[k] = itr
    return by_iter


def _line_iteration(line: str) -> float:
    """The iteration of a ``metrics.json`` line; -inf for a line without one (kept)."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return -math.inf
    itr = record.get("iteration") if isinstance(record, dict) else None
    return float(itr) if isinstance(itr, (int, float)) and not isinstance(itr, bool) else -math.inf


def read_metrics(path: str) -> list[dict[str, Any]]:
    """``metrics.json`` as one record per iteration, in iteration order: a later line of an
    iteration (an evaluation run again after a resume, or any line written again) replaces the
    earlier values key by key. A line cut short by a killed process is skipped with a warning;
    lines without an iteration are left out. A missing file reads as no records."""
    merged: dict[int, dict[str, Any]] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except FileNotFoundError:
        return []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            logging.getLogger(__name__).warning(f"{path}: line {number} is not JSON (cut short?); skipped")
            continue
        itr = record.get("iteration") if isinstance(record, dict) else None
        if isinstance(itr, (int, float)) and not isinstance(itr, bool):
            merged.setdefault(int(itr), {}).update(record)
    return [merged[i] for i in sorted(merged)]


def _drop_partial_last_line(path: str) -> None:
    """A process killed while appending can leave half a line; cut it so the file stays JSON-lines."""
    try:
        with open(path, "rb+") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            if size == 0:
                return
            f.seek(size - 1)
            if f.read(1) == b"\n":
                return
            block = min(size, 1 << 20)
            f.seek(size - block)
            tail = f.read(block)
            cut = tail.rfind(b"\n")
            f.truncate(size - block + cut + 1 if cut >= 0 else (0 if block == size else size))
    except FileNotFoundError:
        return


class JSONWriter(EventWriter):
    """Appends one JSON object per iteration (the scalars put at that iteration and not written
    yet) to a file. Each line is written whole and flushed, so the file is valid JSON-lines even
    after a crash; a partial last line left by a killed process is removed on open."""

    def __init__(self, json_file: str, window_size: int = 20) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(json_file)), exist_ok=True)
        _drop_partial_last_line(json_file)
        self._file_handle = open(json_file, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._window_size = window_size
        self._written: dict[str, int] = {}

    def write(self) -> None:
        by_iter = _new_scalars(get_event_storage(), self._written, self._window_size)
        for itr in sorted(by_iter):
            self._file_handle.write(json.dumps({"iteration": itr, **by_iter[itr]}, sort_keys=True) + "\n")
            self._file_handle.flush()

    def discard_from(self, iteration: int, rewritten: Collection[str] = ()) -> int:
        """Drop the lines of ``iteration`` and later (a resumed run trains them again; what a run
        killed after its last checkpoint wrote of them is superseded), and the keys ``rewritten``
        from the lines of the iteration before (an evaluation the resumed run runs again there).
        Returns how many lines were dropped or changed."""
        path = self._file_handle.name
        self._file_handle.close()
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
        kept = []
        for line in lines:
            itr = _line_iteration(line)
            if itr >= iteration:
                continue
            if itr == iteration - 1 and rewritten:
                record = {k: v for k, v in json.loads(line).items() if k not in rewritten}
                if set(record) == {"iteration"}:
                    continue
                line = json.dumps(record, sort_keys=True) + "\n"
            kept.append(line)
        changed = sum(a != b for a, b in zip(lines, kept)) + len(lines) - len(kept)
        if changed:
            atomic_write(path, lambda f: f.write("".join(kept).encode("utf-8")))
        self._file_handle = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        return changed

    def close(self) -> None:
        self._file_handle.close()


class TensorboardXWriter(EventWriter):
    """Scalars to TensorBoard event files under ``log_dir``, when ``tensorboard`` is installed.

    Without it the writer says so once and does nothing (``pip install tensorboard`` or
    ``pip install fastreid[tensorboard]`` enables it).
    """

    def __init__(self, log_dir: str, window_size: int = 20, **kwargs: Any) -> None:
        self._window_size = window_size
        self._written: dict[str, int] = {}
        self._writer = None
        try:
            from torch.utils.tensorboard import SummaryWriter  # optional: the 'tensorboard' extra
        except ImportError:
            logging.getLogger(__name__).info(
                "TensorBoard logging is off: the 'tensorboard' package is not installed "
                "(pip install tensorboard to turn it on)"
            )
            return
        self._writer = SummaryWriter(log_dir, **kwargs)

    @property
    def enabled(self) -> bool:
        return self._writer is not None

    def write(self) -> None:
        if self._writer is None:
            return
        by_iter = _new_scalars(get_event_storage(), self._written, self._window_size)
        for itr in sorted(by_iter):
            for k, v in by_iter[itr].items():
                self._writer.add_scalar(k, v, itr)
        if by_iter:
            self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


class CommonMetricPrinter(EventWriter):
    """The console line: ETA, epoch, iteration, losses, time per iteration, data time, LR and
    (on CUDA) peak memory."""

    def __init__(self, max_iter: int, iters_per_epoch: Optional[int] = None, window_size: int = 20) -> None:
        self.logger = logging.getLogger(__name__)
        self._max_iter = max_iter
        self._iters_per_epoch = iters_per_epoch
        self._window_size = window_size
        self._last_write: Optional[tuple[int, float]] = None
        self._last_printed_iter = -1

    def _eta(self, storage: EventStorage) -> Optional[str]:
        iteration = storage.iter
        if self._max_iter is None or iteration >= self._max_iter:
            return None
        try:
            sec_per_iter = storage.history("time").median(1000)
        except KeyError:
            sec_per_iter = None
        if sec_per_iter is not None:
            eta = sec_per_iter * (self._max_iter - iteration - 1)
            storage.put_scalar("eta_seconds", eta, smoothing_hint=False)
            return str(datetime.timedelta(seconds=int(eta)))
        if self._last_write is not None:
            last_iter, last_time = self._last_write
            if iteration > last_iter:
                estimate = (time.perf_counter() - last_time) / (iteration - last_iter)
                return str(datetime.timedelta(seconds=int(estimate * (self._max_iter - iteration - 1))))
        self._last_write = (iteration, time.perf_counter())
        return None

    def write(self) -> None:
        storage = get_event_storage()
        iteration = storage.iter
        if iteration == self._max_iter or iteration == self._last_printed_iter:
            return  # nothing new since the last line
        self._last_printed_iter = iteration

        def median(name: str) -> Optional[float]:
            try:
                return storage.history(name).median(self._window_size)
            except KeyError:
                return None

        data_time, iter_time = median("data_time"), median("time")
        try:
            lr = f"{storage.history('lr').latest():.3e}"
        except KeyError:
            lr = "N/A"
        eta = self._eta(storage)
        losses = "  ".join(
            f"{k}: {h.median(self._window_size):.4g}" for k, h in storage.histories().items() if "loss" in k
        )
        epoch = ""
        if self._iters_per_epoch:
            max_epoch = -(-self._max_iter // self._iters_per_epoch)
            epoch = f"epoch: {iteration // self._iters_per_epoch + 1}/{max_epoch}  "
        mem = ""
        if torch.cuda.is_available():
            mem = f"  max_mem: {torch.cuda.max_memory_allocated() / 1024.0 / 1024.0:.0f}M"
        self.logger.info(
            (f"eta: {eta}  " if eta else "")
            + f"{epoch}iter: {iteration + 1}/{self._max_iter}  {losses}"
            + (f"  time: {iter_time:.4f}" if iter_time is not None else "")
            + (f"  data_time: {data_time:.4f}" if data_time is not None else "")
            + f"  lr: {lr}{mem}"
        )
