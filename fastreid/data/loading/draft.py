"""The decision being made (:class:`Draft`), which the policy's rules and the explicit-arguments
path fill in, the small resolutions both use (CUDA target, background thread, thread prefetch cap),
and the finished :class:`LoaderDecision`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from fastreid.data.loading.request import LoaderDecision, LoaderRequest, tri_state
from fastreid.utils.platform import cpu_count, cuda_available

__all__ = [
    "Draft",
    "to_decision",
    "uses_cuda",
    "resolve_background",
    "thread_batches_in_flight",
    "MAX_THREAD_BATCHES_IN_FLIGHT",
]

#: Batches being loaded at once by thread workers, at most (``PREFETCH_FACTOR x NUM_THREADS``
#: otherwise): 1000 threads with prefetch 2 once held 2000 batches, 6.4 GB.
MAX_THREAD_BATCHES_IN_FLIGHT = 32


def uses_cuda(device: str | torch.device | None) -> bool:
    """True when batches go to a CUDA device that is available."""
    if device is None:
        return False
    return torch.device(device).type == "cuda" and cuda_available()


def resolve_background(
    background: bool | str, num_workers: int, num_threads: int, device: str | torch.device | None
) -> bool:
    """ "auto": a background thread only where it overlaps loading with GPU work at no risk: zero
    worker processes and zero thread workers (those already load ahead) feeding a CUDA model."""
    value = tri_state(background, "DATALOADER.BACKGROUND_GENERATOR")
    if value == "auto":
        return num_workers == 0 and num_threads == 0 and uses_cuda(device)
    return bool(value)


def thread_batches_in_flight(prefetch_factor: int | None, num_threads: int) -> tuple[int, str | None]:
    """Batches thread workers load at once, and a warning when the request had to be capped."""
    if num_threads <= 0:
        return 0, None
    wanted = (prefetch_factor or 2) * num_threads
    if wanted <= MAX_THREAD_BATCHES_IN_FLIGHT:
        return wanted, None
    return MAX_THREAD_BATCHES_IN_FLIGHT, (
        f"{num_threads} thread workers x prefetch {prefetch_factor or 2} would hold {wanted} batches in memory; "
        f"capped at {MAX_THREAD_BATCHES_IN_FLIGHT} batches in flight"
        + (
            f" (and {num_threads} threads on {cpu_count()} CPUs rarely help: try {cpu_count() * 2})"
            if num_threads > cpu_count() * 4
            else ""
        )
    )


@dataclasses.dataclass
class Draft:
    """The decision being made; each rule reads and updates it."""

    request: LoaderRequest
    dataset: Any
    collate_fn: Callable | None
    worker_init_fn: Callable | None
    device: torch.device
    is_train: bool
    check_main_guard: bool
    seeded: bool
    workers: int
    threads: int
    context: str | None = None
    persistent: bool = False
    prefetch: int | None = None
    pin: bool = False
    background: bool = False
    thread_prefetch: int = 0
    seed_global_rngs: bool = False
    reasons: list[str] = dataclasses.field(default_factory=list)
    warnings: list[str] = dataclasses.field(default_factory=list)

    def fall_back_to_threads(self) -> str:
        """No worker processes: the requested thread workers, else as many threads as workers."""
        self.threads = self.request.num_threads or self.workers
        self.workers, self.context = 0, None
        return f"{self.threads} thread workers" if self.threads else "the main process"


def to_decision(d: Draft, main_guard: bool) -> LoaderDecision:
    return LoaderDecision(
        num_workers=d.workers,
        num_threads=d.threads,
        mp_context=d.context,
        pin_memory=d.pin,
        persistent_workers=d.persistent,
        prefetch_factor=d.prefetch,
        background=d.background,
        timeout=float(d.request.timeout),
        device=str(d.device),
        request=d.request,
        reasons=d.reasons,
        warnings=d.warnings,
        thread_prefetch=d.thread_prefetch,
        main_guard=main_guard,
        seed_global_rngs=d.seed_global_rngs,
        cuda_prefetch=uses_cuda(d.device),
    )
