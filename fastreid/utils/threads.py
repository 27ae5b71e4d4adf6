"""The one place that decides OpenMP and torch thread settings for a process.

Why: on a CPU shared with anything else (data-loading threads, worker processes, other DDP ranks,
another job), OpenMP worker threads that *spin* at every barrier burn the cores the other work
needs; training measured 5x slower than it should with libgomp's default spinning, and as fast as
upstream with ``OMP_WAIT_POLICY=PASSIVE``. OpenMP reads its wait policy once, when its runtime is
loaded (when ``torch`` is imported), so the decision must be made before that:

- :func:`configure_openmp` (no torch import) sets ``OMP_WAIT_POLICY=PASSIVE`` and
  ``GOMP_SPINCOUNT=3000`` unless the user set any wait variable (``OMP_WAIT_POLICY``,
  ``GOMP_SPINCOUNT``, ``KMP_BLOCKTIME``, ``KMP_LIBRARY``) — a user's explicit value always wins.
  libgomp (torch's OpenMP on Linux) then spins ~30 us at a barrier before it sleeps: measured
  (benchmarks/README.md, "training") faster than sleeping at once on a quiet machine and under a
  CPU hog, where its default 3 ms spin is the slowest; other runtimes read the passive policy.
  ``tools/train_net.py`` calls it first thing; worker processes inherit the environment.
- :func:`intra_op_threads` is the number of torch intra-op threads for one rank: the CPUs this
  process may use (affinity mask and cgroup quota) divided by the ranks on this machine, unless
  ``OMP_NUM_THREADS`` is set.
- :func:`keep_thread_out_of_compute_pool` gives a loading thread one OpenMP thread of its own, so
  that its image operations never start an OpenMP team competing with the training step's.
- :func:`configure_threads` applies both (``setup_environment`` calls it) and :func:`describe`
  gives the one line that the environment report logs once per process.

This module imports nothing heavier than the standard library.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "WAIT_VARIABLES",
    "ThreadDecision",
    "available_cpus",
    "configure_openmp",
    "configure_threads",
    "describe",
    "intra_op_threads",
    "keep_thread_out_of_compute_pool",
    "local_ranks",
]

logger = logging.getLogger(__name__)

# Variables through which a user (or their scheduler) chooses how OpenMP threads wait.
WAIT_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME", "KMP_LIBRARY")
DEFAULT_WAIT_POLICY = "PASSIVE"
# libgomp reads GOMP_SPINCOUNT before the policy: spin this long (~100,000 spins per ms) before
# sleeping. Its default without a policy is 300,000 (3 ms); with PASSIVE alone, 0.
DEFAULT_SPIN_COUNT = "3000"
DEFAULT_POLICY_TEXT = f"{DEFAULT_WAIT_POLICY}, GOMP_SPINCOUNT={DEFAULT_SPIN_COUNT}"
# Tells child processes (spawn workers, DDP ranks) that the wait variable they inherit was ours.
_MARKER = "FASTREID_OMP_WAIT_SET"


@dataclass
class ThreadDecision:
    """What was decided, and why, for the environment report."""

    wait_policy: str  # the value in effect ("PASSIVE", the user's value, or "runtime default")
    wait_source: str  # "fastreid", "user (NAME=VALUE)", or why nothing could be set
    threads: int | None = None  # torch intra-op threads, once applied
    threads_source: str = ""


_decision: ThreadDecision | None = None
_torch_default_threads: int | None = None


def _cgroup_cpu_limit(path: str = "/sys/fs/cgroup/cpu.max") -> int | None:
    """CPUs allowed by a cgroup v2 quota (``quota period``), rounded up; None when unlimited."""
    try:
        with open(path, encoding="ascii") as f:
            quota, period = f.read().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    try:
        return max(1, -(-int(quota) // int(period)))
    except (ValueError, ZeroDivisionError):
        return None


def available_cpus() -> int:
    """CPUs this process may run on: its affinity mask, capped by a cgroup CPU quota."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS, Windows
        cpus = os.cpu_count() or 1
    limit = _cgroup_cpu_limit()
    return max(1, min(cpus, limit) if limit else cpus)


def local_ranks(environ: MutableMapping[str, str] | None = None, default: int = 1) -> int:
    """Processes of this job on this machine: torchrun's ``LOCAL_WORLD_SIZE`` when set."""
    env = os.environ if environ is None else environ
    try:
        return max(1, int(env.get("LOCAL_WORLD_SIZE", default)))
    except ValueError:
        return max(1, default)


def intra_op_threads(
    ranks_per_machine: int | None = None, environ: MutableMapping[str, str] | None = None
) -> int:
    """torch intra-op threads for one rank: ``OMP_NUM_THREADS`` if the user set it, else the
    available CPUs divided among the ranks on this machine (at least 1)."""
    env = os.environ if environ is None else environ
    user = env.get("OMP_NUM_THREADS", "").strip()
    if user.isdigit() and int(user) > 0:
        return int(user)
    ranks = ranks_per_machine if ranks_per_machine else local_ranks(env)
    return max(1, available_cpus() // max(1, ranks))


def configure_openmp(environ: MutableMapping[str, str] | None = None) -> ThreadDecision:
    """Choose how OpenMP threads wait, before torch loads the OpenMP runtime.

    Sets ``OMP_WAIT_POLICY=PASSIVE`` and ``GOMP_SPINCOUNT=3000`` unless a wait variable is already
    set. Calling it after
    ``torch`` was imported changes nothing (the runtime has read its settings) and says so.
    Idempotent: later calls return the first decision.
    """
    global _decision
    if _decision is not None and environ is None:
        return _decision
    env = os.environ if environ is None else environ
    user = [(name, env[name]) for name in WAIT_VARIABLES if name in env]
    if user and env.get(_MARKER) == f"{user[0][0]}={user[0][1]}":
        decision = ThreadDecision(
            wait_policy=", ".join(v if n == "OMP_WAIT_POLICY" else f"{n}={v}" for n, v in user),
            wait_source="fastreid, inherited from the parent process",
        )
    elif user:
        name, value = user[0]
        decision = ThreadDecision(wait_policy=f"{name}={value}", wait_source="user")
    elif "torch" in sys.modules:
        decision = ThreadDecision(
            wait_policy="runtime default",
            wait_source="torch was imported before fastreid could choose; export OMP_WAIT_POLICY=PASSIVE "
            f"GOMP_SPINCOUNT={DEFAULT_SPIN_COUNT} before starting Python if other work shares these cores",
        )
    else:
        env["OMP_WAIT_POLICY"] = DEFAULT_WAIT_POLICY
        env["GOMP_SPINCOUNT"] = DEFAULT_SPIN_COUNT
        env[_MARKER] = f"OMP_WAIT_POLICY={DEFAULT_WAIT_POLICY}"
        decision = ThreadDecision(wait_policy=DEFAULT_POLICY_TEXT, wait_source="fastreid")
    if environ is None:
        _decision = decision
    return decision


def configure_threads(
    ranks_per_machine: int | None = None, environ: MutableMapping[str, str] | None = None
) -> ThreadDecision:
    """:func:`configure_openmp`, then the torch intra-op thread count if torch is loaded."""
    global _torch_default_threads
    decision = configure_openmp(environ)
    if "torch" in sys.modules and environ is None:  # a given mapping is a dry run (tests)
        torch = sys.modules["torch"]  # already loaded: this module never imports it
        env = os.environ if environ is None else environ
        if _torch_default_threads is None:
            _torch_default_threads = torch.get_num_threads()
        threads = intra_op_threads(ranks_per_machine, env)
        if "OMP_NUM_THREADS" not in env:  # never more than torch's own default (physical cores)
            threads = min(threads, _torch_default_threads)
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        decision.threads = threads
        decision.threads_source = (
            "OMP_NUM_THREADS"
            if "OMP_NUM_THREADS" in env
            else f"{available_cpus()} CPUs / {ranks_per_machine or local_ranks(env)} rank(s) on this machine"
        )
    return decision


def describe() -> str:
    """One line: the wait policy and thread count in effect and where they came from."""
    d = _decision or configure_openmp()
    text = f"OpenMP wait: {d.wait_policy} ({d.wait_source})"
    if d.threads is not None:
        text += f"; torch threads: {d.threads} ({d.threads_source})"
    return text


_omp_setter: Any = None  # not looked up yet; then a ctypes function, or False when unavailable


def _omp_set_num_threads() -> Callable[[int], Any] | None:
    """``omp_set_num_threads`` of the OpenMP runtime torch loaded, or None (no OpenMP, or a
    platform where it cannot be found by name)."""
    global _omp_setter
    if _omp_setter is None:
        _omp_setter = False
        candidates: list[str | None] = [None] if os.name == "posix" else ["libiomp5md", "vcomp140", "libomp"]
        for name in candidates:
            try:
                _omp_setter = ctypes.CDLL(name).omp_set_num_threads
                break
            except (OSError, AttributeError):
                continue
    return _omp_setter or None


def keep_thread_out_of_compute_pool() -> bool:
    """Run the calling thread's torch operations on that thread alone (one OpenMP thread).

    For data-loading threads: the OpenMP thread count is per thread (an ICV), so this leaves the
    training step's intra-op threads as they are, while an image resize in a loader thread no
    longer forks an OpenMP team of its own that competes with them for the same cores.
    ``torch.set_num_threads`` cannot do this: it also changes the process-wide default that
    threads started later inherit. Returns False where the OpenMP runtime cannot be reached
    (then nothing changes).
    """
    import torch  # not at the top: this module is imported before the OpenMP decision, torch after it

    torch.get_num_threads()  # torch sets a thread's OpenMP count on first use; have that happen first
    setter = _omp_set_num_threads()
    if setter is None:
        return False
    setter(1)
    return torch.get_num_threads() == 1
