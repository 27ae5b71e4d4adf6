"""The decision for a ``DataLoaderX`` built with explicit arguments (not through the factories):
what was asked, as is, with "auto" resolved, thread prefetch capped, the ``__main__`` guard to be
checked at iteration for spawn / forkserver workers, and warnings logged once."""

from __future__ import annotations

import logging
from typing import Any

import torch

from fastreid.data.loading.draft import Draft, resolve_background, to_decision, uses_cuda
from fastreid.data.loading.request import LoaderDecision, LoaderRequest
from fastreid.data.loading.rules import rule_global_rngs, rule_thread_prefetch
from fastreid.utils.platform import current_start_method

__all__ = ["explicit_decision"]

logger = logging.getLogger(__name__)


def explicit_decision(
    *,
    dataset: Any,
    num_workers: int,
    num_threads: int,
    multiprocessing_context: Any,
    pin_memory: bool,
    persistent_workers: bool,
    prefetch_factor: int | None,
    background: bool | str,
    timeout: float,
    device: str | torch.device | None,
    seeded: bool,
) -> LoaderDecision:
    """The decision for a ``DataLoaderX`` built with explicit arguments: what was asked, as is
    (no platform fallbacks), with "auto" resolved, the thread prefetch capped and the ``__main__``
    guard checked at iteration for spawn / forkserver workers."""
    if num_threads < 0 or num_workers < 0:
        raise ValueError(
            f"DataLoaderX: num_workers ({num_workers}) and num_threads ({num_threads}) must be >= 0"
        )
    if num_threads > 0 and num_workers > 0:
        raise ValueError(
            f"DataLoaderX: use worker processes (num_workers={num_workers}) or thread workers "
            f"(num_threads={num_threads}), not both"
        )
    if multiprocessing_context is None:
        method = current_start_method() if num_workers > 0 else None
    elif isinstance(multiprocessing_context, str):
        method = multiprocessing_context
    else:
        method = multiprocessing_context.get_start_method()
    device_obj = torch.device(device) if device is not None else None
    request = LoaderRequest(
        num_workers=num_workers,
        num_threads=num_threads,
        pin_memory=bool(pin_memory),
        persistent_workers=bool(persistent_workers) and num_workers > 0,
        prefetch_factor=prefetch_factor or 2,
        background=background,
        timeout=timeout,
        mp_context=method if method in ("fork", "spawn", "forkserver") else "auto",
    )
    draft = Draft(
        request,
        dataset,
        None,
        None,
        device_obj or torch.device("cpu"),
        True,
        True,
        seeded,
        num_workers,
        num_threads,
        context=method if num_workers > 0 else None,
    )
    draft.persistent = bool(persistent_workers) and num_workers > 0
    draft.prefetch = prefetch_factor if num_workers > 0 else None
    # without a device the caller moves batches itself: pinning is torch's to do as asked
    draft.pin = bool(pin_memory) and (device_obj is None or uses_cuda(device_obj))
    draft.background = resolve_background(background, num_workers, num_threads, device_obj)
    for rule in (rule_thread_prefetch, rule_global_rngs):
        rule(draft)
    for warning in draft.warnings:
        _warn_once(warning)
    decision = to_decision(draft, main_guard=num_workers > 0 and method in ("spawn", "forkserver"))
    decision.mp_context = multiprocessing_context if num_workers > 0 else None
    return decision


_warned: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _warned:
        _warned.add(message)
        logger.warning(message)
