"""RAdam (Liu et al., "On the Variance of the Adaptive Learning Rate and Beyond", 2020):
torch's ``torch.optim.RAdam`` with upstream FastReID's arguments and its weight decay, which is
decoupled (``w -= lr * weight_decay * w``, as AdamW) rather than added to the gradient."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

__all__ = ["PlainRAdam", "RAdam"]


class RAdam(torch.optim.RAdam):
    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 0.001,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            params,
            lr=lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
            decoupled_weight_decay=True,
            **kwargs,
        )


class PlainRAdam(RAdam):
    """Upstream's second RAdam class: the same algorithm (upstream's differs only in caching the
    rectification terms per step, which torch computes directly)."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, **kwargs)
