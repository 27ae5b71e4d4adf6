"""Worker processes: their start-up (threads, seeds, exit with the trainer) and how the death of a
forked worker reaches the loader instead of whatever code the trainer happens to run.

- :class:`WorkerInit` runs first in every worker process: one torch thread, Python / numpy / torch
  seeded from the worker's seed, and the worker exits with the process that started it, even
  after ``kill -9`` of the trainer (torch's own check notices a dead parent only every few
  seconds, and only between samples): on Linux ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` when the
  workers were started by the main thread (the signal follows the *thread* that forked, and a
  background thread may end before its workers), and everywhere a daemon thread that watches the
  parent's pid.
- torch installs a ``SIGCHLD`` handler that raises ``RuntimeError: DataLoader worker (pid N) is
  killed by signal`` in the main thread at whatever line it is running (``optimizer.step()``).
  :func:`install_worker_death_guard` wraps that handler: inside the loader's ``next()`` the error
  is raised as before (and explained there); elsewhere it is recorded, and the loader's next
  ``next()`` explains it as a :class:`SampleLoadError` naming the worker, batch and samples.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import random
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from fastreid.data.loading.seeds import GlobalSeededDataset
from fastreid.utils.env import limit_worker_threads

__all__ = [
    "WorkerInit",
    "die_with_parent",
    "watch_parent",
    "install_worker_death_guard",
    "loader_next",
    "pending_worker_death",
]

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int | None = None) -> bool:
    """Ask Linux to SIGKILL this process when its parent exits; True when that is in place.

    ``parent_pid``: the expected parent; if the parent is already gone (it died before this call)
    the process exits at once.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)  # the parent died before prctl: nothing will ever read our results
    return True


def _watch(parent_pid: int, interval: float) -> None:
    while os.getppid() == parent_pid:
        time.sleep(interval)
    os._exit(1)


def watch_parent(parent_pid: int, interval: float = 0.25) -> None:
    """A daemon thread that ends this process when its parent ``parent_pid`` is gone (the process
    is re-parented then)."""
    threading.Thread(
        target=_watch, args=(parent_pid, interval), name="fastreid-parent-watch", daemon=True
    ).start()


class WorkerInit:
    """``worker_init_fn`` of DataLoaderX worker processes: exit with the trainer, one torch thread,
    Python, numpy and torch seeded from the worker's seed, then the user's ``worker_init_fn``.

    torch gives worker ``i`` the seed ``base_seed + i`` where ``base_seed`` is drawn from the
    loader's generator, which DataLoaderX seeds from its ``seed``: seeds are per worker and
    reproducible.
    """

    def __init__(self, user_fn: Callable[[int], None] | None = None):
        self.user_fn = user_fn
        self.parent_pid = os.getpid()
        self.started_by_main_thread = True  # set by DataLoaderX when it starts the workers

    def __call__(self, worker_id: int) -> None:
        parent = os.getppid()  # the trainer; for forkserver workers the fork server (which exits with it)
        if self.started_by_main_thread or parent != self.parent_pid:
            die_with_parent(parent)
        watch_parent(parent)
        limit_worker_threads(1)
        seed = torch.initial_seed()
        random.seed(seed)
        np.random.seed(seed % 2**32)
        torch.manual_seed(seed)
        info = torch.utils.data.get_worker_info()
        if info is not None and isinstance(info.dataset, GlobalSeededDataset):
            info.dataset.restore = False  # a fork copy: this process's random state is nobody else's
        if self.user_fn is not None:
            self.user_fn(worker_id)


# --------------------------------------------------------------------------------------------
# SIGCHLD: a dead forked worker is reported by the loader, not by unrelated code
# --------------------------------------------------------------------------------------------
_state = threading.local()
_pending: list[RuntimeError] = []


def _in_loader_next() -> bool:
    return getattr(_state, "depth", 0) > 0


@contextlib.contextmanager
def loader_next() -> Iterator[None]:
    """Mark the loader's ``next()`` (a dead worker's error is raised right there)."""
    _state.depth = getattr(_state, "depth", 0) + 1
    try:
        yield
    finally:
        _state.depth -= 1


def pending_worker_death() -> RuntimeError | None:
    """The worker-death error recorded outside ``next()``, if any (cleared by this call)."""
    if not _pending:
        return None
    error = _pending[-1]
    _pending.clear()
    return error


def install_worker_death_guard() -> None:
    """Wrap the current ``SIGCHLD`` handler (torch's, installed when worker processes start) so that
    its error is deferred to the loader's next ``next()`` when it fires elsewhere. Only from the
    main thread on POSIX; idempotent."""
    if not hasattr(signal, "SIGCHLD") or threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGCHLD)
    if getattr(previous, "_fastreid_guard", False) or not callable(previous):
        return

    def handler(signum: int, frame: Any) -> None:
        try:
            previous(signum, frame)
        except RuntimeError as exc:
            if "DataLoader worker" not in str(exc) or _in_loader_next():
                raise
            _pending.append(exc)

    handler._fastreid_guard = True  # type: ignore[attr-defined]
    signal.signal(signal.SIGCHLD, handler)
