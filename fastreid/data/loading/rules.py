"""The loader policy: one small function per rule, composed by :func:`decide`.

Together with ``fastreid.utils.platform`` (the facts) this is the only place that decides on
platform matters. Input: what the user asked for (:class:`LoaderRequest`, usually from
``cfg.DATALOADER``), the dataset, its collate and worker-init functions, and the device. Output:
a :class:`LoaderDecision` with the settings to use and the reasons; ``DataLoaderX`` carries it
out and decides nothing again.

The rules, in the order they apply:

- CUDA device: batches go to a CUDA device only when CUDA is available (else a warning).
- Windows with ``WINDOWS_SAFE``: no worker processes (error 1455, pickling errors, re-spawn
  costs); thread workers when ``NUM_THREADS`` > 0, else loading in the main process.
- A daemon process cannot start worker processes: threads instead.
- Start method "auto": spawn on Windows, macOS and ROCm; fork on Linux. A method not available
  here is replaced; fork on ROCm is warned about.
- Worker state: a dataset (or collate / worker-init function) holding tensors or modules on a
  non-CPU device, or, for spawn / forkserver, one that cannot be pickled, means threads instead.
- ``__main__`` guard: spawn / forkserver workers started from the unguarded top-level code of a
  script mean threads instead (and inside a spawned worker's bootstrap, an error).
- Shared memory: a small ``/dev/shm`` is warned about.
- Persistence and prefetch exist only with worker processes; "auto" keeps spawn workers.
- Pinned memory only when batches go to an available CUDA device.
- Background thread ("auto"): with zero workers and zero threads feeding a CUDA model.
- Thread prefetch is capped (in batches); an absurd thread count is warned about.
- Global random generators: seeded per sample for datasets without sample keys when a seed is
  given (not possible with thread workers, which is said once).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any

import torch

from fastreid.data.loading.draft import (
    Draft,
    resolve_background,
    thread_batches_in_flight,
    to_decision,
    uses_cuda,
)
from fastreid.data.loading.main_guard import (
    find_unguarded_main_call,
    inside_spawn_bootstrap,
    unguarded_main_message,
)
from fastreid.data.loading.probe import find_worker_state_problems
from fastreid.data.loading.request import LoaderDecision, LoaderRequest
from fastreid.utils.platform import (
    available_start_methods,
    cpu_count,
    is_linux,
    is_rocm,
    is_windows,
    preferred_start_method,
    shared_memory_bytes,
)

__all__ = ["decide", "RULES", "THREADS_NEED_KEYS"]

SMALL_SHM_BYTES = 256 * 2**20

THREADS_NEED_KEYS = (
    "thread workers share Python's, numpy's and torch's global random generators, so a dataset that "
    "draws from them (torch.rand, random transforms) gets batches that differ from run to run. For "
    "bit-identical batches give the dataset class `accepts_sample_keys = True`: its __getitem__ then "
    "receives SampleKey(index, seed) (fastreid.data.loading.seeds) and draws from "
    "`g = torch.Generator().manual_seed(key.seed)`, e.g. `torch.rand(3, generator=g)`"
)


def rule_cuda_device(d: Draft) -> None:
    if d.device.type == "cuda" and not uses_cuda(d.device):
        d.warnings.append(
            f"device {d.device} requested but CUDA is not available: no pinned memory, no stream prefetch"
        )


def rule_windows(d: Draft) -> None:
    if not (d.workers > 0 and is_windows() and d.request.windows_safe):
        return
    threads = d.request.num_threads
    d.reasons.append(
        f"Windows with DATALOADER.WINDOWS_SAFE True: no worker processes (requested {d.workers}), which avoids "
        "error 1455, pickling errors and re-spawn costs; "
        + (
            f"using {threads} thread workers (DATALOADER.NUM_THREADS)"
            if threads
            else "loading in the main process (set DATALOADER.NUM_THREADS > 0 for thread workers, or "
            "WINDOWS_SAFE False for spawn workers)"
        )
    )
    d.workers, d.threads = 0, threads


def rule_daemon_process(d: Draft) -> None:
    if d.workers > 0 and multiprocessing.current_process().daemon:
        instead = d.fall_back_to_threads()
        d.warnings.append(
            f"this process is a daemon process, which cannot start worker processes; using {instead}"
        )


def rule_start_method(d: Draft) -> None:
    if d.workers == 0:
        return
    if d.request.mp_context == "auto":
        d.context, why = preferred_start_method()
        d.reasons.append(f"start method {d.context}: {why}")
    else:
        d.context = d.request.mp_context
        if d.context not in available_start_methods():
            fallback, why = preferred_start_method()
            d.warnings.append(
                f"DATALOADER.MP_CONTEXT {d.context!r} is not available here; using {fallback} ({why})"
            )
            d.context = fallback
        elif d.context == "fork" and is_rocm():
            d.warnings.append(
                "DATALOADER.MP_CONTEXT 'fork' on ROCm: forked workers may fail after HIP starts; "
                "'auto' picks spawn"
            )
    if d.request.num_threads:
        d.reasons.append("DATALOADER.NUM_THREADS not used: worker processes load the data")
    d.threads = 0


def rule_worker_state(d: Draft) -> None:
    if d.workers == 0:
        return
    context = d.context
    problems = find_worker_state_problems(
        d.dataset, d.collate_fn, d.worker_init_fn, check_pickle=context in ("spawn", "forkserver")
    )
    if not problems:
        return
    instead = d.fall_back_to_threads()
    d.warnings.append(
        f"worker processes ({context}) cannot load from this dataset: "
        + "; ".join(problems[:3])
        + f". Using {instead} instead. "
        + (
            "To use worker processes, make these attributes picklable or create them lazily in the worker"
            if all("cannot be pickled" in p or "interactive" in p for p in problems)
            else "To use worker processes, keep models and GPU tensors out of the dataset (or on the CPU)"
        )
    )


def rule_main_guard(d: Draft) -> None:
    if d.workers == 0 or d.context not in ("spawn", "forkserver") or not d.check_main_guard:
        return
    if inside_spawn_bootstrap():
        where = find_unguarded_main_call()
        raise RuntimeError(
            unguarded_main_message(where, d.context, None)
            if where
            else "a spawned worker process is re-running the main script; protect it with "
            '`if __name__ == "__main__":`'
        )
    where = find_unguarded_main_call()
    if where is not None:
        context = d.context
        d.warnings.append(unguarded_main_message(where, context, d.fall_back_to_threads()))


def rule_shared_memory(d: Draft) -> None:
    if d.workers > 0 and is_linux():
        shm = shared_memory_bytes()
        if shm is not None and shm < SMALL_SHM_BYTES:
            d.warnings.append(
                f"/dev/shm is only {shm / 2**20:.0f} MiB: worker processes may die with a bus error; give docker "
                "--shm-size=2g or use DATALOADER.NUM_THREADS"
            )


def rule_persistence(d: Draft) -> None:
    if d.workers > 0:
        if d.request.persistent_workers == "auto":
            d.persistent = d.is_train and d.context != "fork"
            if d.persistent:
                d.reasons.append(
                    f"persistent workers: {d.context} workers are slow to start, kept between epochs"
                )
        else:
            d.persistent = bool(d.request.persistent_workers)
        d.prefetch = d.request.prefetch_factor
    elif d.request.persistent_workers is True and d.request.num_workers > 0:
        d.reasons.append("persistent workers off: no worker processes")


def rule_pin_memory(d: Draft) -> None:
    on_cuda = uses_cuda(d.device)
    if d.request.pin_memory == "auto":
        d.pin = on_cuda
    else:
        d.pin = bool(d.request.pin_memory) and on_cuda
        if d.request.pin_memory and not on_cuda:
            d.reasons.append("pin memory off: batches do not go to a CUDA device")


def rule_background(d: Draft) -> None:
    d.background = resolve_background(d.request.background, d.workers, d.threads, d.device)
    if d.request.background == "auto" and d.background:
        d.reasons.append("background generator on: zero worker processes feeding a CUDA model")


def rule_thread_prefetch(d: Draft) -> None:
    d.thread_prefetch, warning = thread_batches_in_flight(d.request.prefetch_factor, d.threads)
    if warning:
        d.warnings.append(warning)
    elif d.threads > cpu_count() * 4:
        d.reasons.append(f"{d.threads} thread workers on {cpu_count()} CPUs: more threads rarely help")


def rule_global_rngs(d: Draft) -> None:
    if not d.seeded or getattr(d.dataset, "accepts_sample_keys", False):
        return
    if d.threads > 0:
        d.warnings.append(THREADS_NEED_KEYS)
    else:
        d.seed_global_rngs = True


RULES: tuple[Callable[[Draft], None], ...] = (
    rule_cuda_device,
    rule_windows,
    rule_daemon_process,
    rule_start_method,
    rule_worker_state,
    rule_main_guard,
    rule_shared_memory,
    rule_persistence,
    rule_pin_memory,
    rule_background,
    rule_thread_prefetch,
    rule_global_rngs,
)


def decide(
    request: LoaderRequest,
    dataset: Any,
    *,
    collate_fn: Callable | None = None,
    worker_init_fn: Callable | None = None,
    device: str | torch.device | None = None,
    is_train: bool = True,
    check_main_guard: bool = True,
    seeded: bool = False,
) -> LoaderDecision:
    """Apply the rules (see the module docstring) to ``request``. ``seeded``: the loader has a
    seed given by the user (same seed, same batches)."""
    draft = Draft(
        request,
        dataset,
        collate_fn,
        worker_init_fn,
        torch.device(device) if device is not None else torch.device("cpu"),
        is_train,
        check_main_guard,
        seeded,
        request.num_workers,
        request.num_threads,
    )
    for rule in RULES:
        rule(draft)
    return to_decision(
        draft, main_guard=draft.workers > 0 and draft.context in ("spawn", "forkserver") and check_main_guard
    )
