"""Optimizers, LR schedules and gradient clipping built from the config."""

from .build import (
    build_gradient_clipper,
    build_lr_scheduler,
    build_optimizer,
    get_default_optimizer_params,
    optimizer_and_wrapper,
)
from .lr_scheduler import WarmupLR, warmup_factor_at_iter

__all__ = [
    "WarmupLR",
    "build_gradient_clipper",
    "build_lr_scheduler",
    "build_optimizer",
    "get_default_optimizer_params",
    "optimizer_and_wrapper",
    "warmup_factor_at_iter",
]
