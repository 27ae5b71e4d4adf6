"""The factories: a ``DataLoaderX`` built through the policy.

- :func:`build_dataloader`: the explicit form takes a :class:`LoaderRequest` (``request=``) and no
  config; the config form (``cfg=``) maps ``cfg.DATALOADER.*`` to a request first.
- :func:`create_dataloader`: plain arguments for user scripts, including the short calls of the
  guides this project grew out of: ``create_dataloader(dataset, num_workers=0, seed=42)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils.data import BatchSampler, RandomSampler, SequentialSampler

from fastreid.data.data_utils import DataLoaderX
from fastreid.data.loading.report import log_decision
from fastreid.data.loading.request import LoaderRequest
from fastreid.data.loading.rules import decide
from fastreid.utils import comm
from fastreid.utils.platform import get_recommended_num_workers

__all__ = ["build_dataloader", "create_dataloader", "loader_from_request"]

DEFAULT_BATCH_SIZE = 32


def loader_from_request(
    request: LoaderRequest,
    dataset: Any,
    batch_sampler: Any,
    collate_fn: Callable | None = None,
    worker_init_fn: Callable[[int], None] | None = None,
    device: str | torch.device | None = None,
    seed: int | None = None,
    is_train: bool = True,
    rank: int = 0,
    start_batch: int = 0,
) -> DataLoaderX:
    """Decide (and log the decision once), then build the ``DataLoaderX`` that carries it out."""
    decision = decide(
        request,
        dataset,
        collate_fn=collate_fn,
        worker_init_fn=worker_init_fn,
        device=device,
        is_train=is_train,
        seeded=seed is not None,
    )
    log_decision(decision)
    return DataLoaderX(
        dataset,
        batch_sampler=batch_sampler,
        collate_fn=collate_fn,
        worker_init_fn=worker_init_fn,
        device=device,
        seed=seed,
        rank=rank,
        start_batch=start_batch,
        decision=decision,
    )


def build_dataloader(
    dataset: Any,
    *,
    batch_sampler: Any,
    collate_fn: Callable | None = None,
    request: LoaderRequest | None = None,
    cfg: Any = None,
    device: str | torch.device | None = None,
    seed: int | None = None,
    start_batch: int = 0,
    is_train: bool = True,
    worker_init_fn: Callable[[int], None] | None = None,
    rank: int | None = None,
) -> DataLoaderX:
    """A ``DataLoaderX`` over ``batch_sampler`` with the policy applied to ``request`` (explicit
    form) or to ``cfg.DATALOADER.*`` (config form). ``rank`` defaults to this process's rank."""
    if (request is None) == (cfg is None):
        raise TypeError(
            "build_dataloader: give either request= (a LoaderRequest) or cfg=, not both or neither"
        )
    if request is None:
        request = LoaderRequest.from_cfg(cfg)
    if rank is None:
        rank = comm.get_rank()
    return loader_from_request(
        request,
        dataset,
        batch_sampler,
        collate_fn,
        worker_init_fn,
        device,
        seed,
        is_train,
        rank=rank,
        start_batch=start_batch,
    )


def create_dataloader(
    dataset: Any,
    batch_size: int = DEFAULT_BATCH_SIZE,
    shuffle: bool = True,
    num_workers: int | None = None,
    seed: int | None = 0,
    force_zero_workers_on_windows: bool = True,
    *,
    num_threads: int = 0,
    mp_context: str = "auto",
    pin_memory: bool | str = "auto",
    persistent_workers: bool | str = "auto",
    prefetch_factor: int = 2,
    background: bool | str = "auto",
    timeout: float = 300,
    device: str | torch.device | None = None,
    collate_fn: Callable | None = None,
    drop_last: bool = False,
    worker_init_fn: Callable[[int], None] | None = None,
    is_train: bool | None = None,
) -> DataLoaderX:
    """A ``DataLoaderX`` from plain arguments, with the platform policy applied (for user scripts).

    ``create_dataloader(dataset, num_workers=0, seed=42)`` works: ``batch_size`` defaults to 32
    and ``shuffle`` to True. ``num_workers=None`` uses :func:`get_recommended_num_workers`.
    ``force_zero_workers_on_windows`` is ``DATALOADER.WINDOWS_SAFE``. ``seed`` (default 0) seeds
    the shuffling and every sample (same seed, same batches with 0 workers, fork or spawn workers;
    see ``DataLoaderX``); ``seed=None`` draws a fresh one.
    """
    if num_workers is None:
        num_workers = get_recommended_num_workers()
    request = LoaderRequest(
        num_workers=num_workers,
        num_threads=num_threads,
        mp_context=mp_context,
        windows_safe=force_zero_workers_on_windows,
        pin_memory=pin_memory,
        persistent_workers=persistent_workers,
        prefetch_factor=prefetch_factor,
        background=background,
        timeout=timeout,
    )
    generator = torch.Generator()
    if seed is None:
        generator.seed()
    else:
        generator.manual_seed(int(seed))
    sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
    return loader_from_request(
        request,
        dataset,
        BatchSampler(sampler, batch_size, drop_last),
        collate_fn,
        worker_init_fn,
        device,
        seed,
        is_train=shuffle if is_train is None else is_train,
    )
