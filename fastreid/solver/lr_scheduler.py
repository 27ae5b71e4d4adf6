"""Learning-rate schedules as upstream FastReID runs them.

Two schedulers drive one optimizer:

- ``warmup_sched`` (:class:`WarmupLR`), stepped after every iteration during the first
  ``SOLVER.WARMUP_ITERS`` iterations; it sets ``lr = base_lr * factor(iteration)``.
- ``lr_sched`` (:class:`torch.optim.lr_scheduler.MultiStepLR` or ``CosineAnnealingLR``), stepped
  once per epoch, only once warmup is over and ``SOLVER.DELAY_EPOCHS`` have passed. Both are
  chainable: they scale the optimizer's current ``lr``, so the warmup's final value (the base LR)
  is where they start.
"""

from __future__ import annotations

from torch import Tensor
from torch.optim import Optimizer
from torch.optim.lr_scheduler import CosineAnnealingLR, LRScheduler, MultiStepLR

__all__ = ["WarmupLR", "MultiStepLR", "CosineAnnealingLR", "warmup_factor_at_iter", "WARMUP_METHODS"]

WARMUP_METHODS = ("constant", "linear", "exp")


def warmup_factor_at_iter(method: str, it: int, warmup_iters: int, warmup_factor: float) -> float:
    """The LR multiplier at iteration ``it`` of a warmup of ``warmup_iters`` iterations.

    ``constant``: ``warmup_factor`` until the end of warmup; ``linear``: from ``warmup_factor``
    to 1 in a straight line; ``exp``: ``warmup_factor ** (1 - it / warmup_iters)``. 1 from
    ``warmup_iters`` on.
    """
    if method not in WARMUP_METHODS:
        raise ValueError(f"Unknown SOLVER.WARMUP_METHOD {method!r}; use one of {', '.join(WARMUP_METHODS)}")
    if it >= warmup_iters:
        return 1.0
    alpha = it / warmup_iters
    if method == "constant":
        return warmup_factor
    if method == "linear":
        return warmup_factor * (1.0 - alpha) + alpha
    return warmup_factor ** (1.0 - alpha)


class WarmupLR(LRScheduler):
    """Per-iteration warmup: ``lr = base_lr * warmup_factor_at_iter(...)`` (closed form)."""

    def __init__(
        self,
        optimizer: Optimizer,
        warmup_factor: float = 0.1,
        warmup_iters: int = 1000,
        warmup_method: str = "linear",
        last_epoch: int = -1,
    ) -> None:
        if warmup_method not in WARMUP_METHODS:
            raise ValueError(
                f"Unknown SOLVER.WARMUP_METHOD {warmup_method!r}; use one of {', '.join(WARMUP_METHODS)}"
            )
        self.warmup_factor = warmup_factor
        self.warmup_iters = warmup_iters
        self.warmup_method = warmup_method
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float | Tensor]:
        factor = warmup_factor_at_iter(
            self.warmup_method, self.last_epoch, self.warmup_iters, self.warmup_factor
        )
        return [base_lr * factor for base_lr in self.base_lrs]

    def _get_closed_form_lr(self) -> list[float | Tensor]:
        return self.get_lr()
