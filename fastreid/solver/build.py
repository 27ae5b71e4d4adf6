"""Optimizer, LR schedules and gradient clipping from the config (upstream FastReID's rules)."""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Iterable
from typing import Any, Callable, Optional

import torch
from torch import nn

from fastreid.config import CfgNode, ConfigError

from . import lr_scheduler

__all__ = [
    "NORM_MODULE_TYPES",
    "SUPPORTED_OPTIMIZERS",
    "SUPPORTED_SCHEDULERS",
    "build_gradient_clipper",
    "build_lr_scheduler",
    "build_optimizer",
    "get_default_optimizer_params",
]

logger = logging.getLogger(__name__)

SUPPORTED_OPTIMIZERS = ("SGD", "Adam", "AdamW")
SUPPORTED_SCHEDULERS = ("MultiStepLR", "CosineAnnealingLR")

NORM_MODULE_TYPES: tuple[type, ...] = (
    nn.BatchNorm1d,
    nn.BatchNorm2d,
    nn.BatchNorm3d,
    nn.SyncBatchNorm,
    nn.GroupNorm,
    nn.InstanceNorm1d,
    nn.InstanceNorm2d,
    nn.InstanceNorm3d,
    nn.LayerNorm,
    nn.LocalResponseNorm,
)


def get_default_optimizer_params(
    model: nn.Module,
    base_lr: float,
    weight_decay: float,
    weight_decay_norm: Optional[float] = None,
    bias_lr_factor: float = 1.0,
    heads_lr_factor: float = 1.0,
    weight_decay_bias: Optional[float] = None,
) -> list[dict[str, Any]]:
    """One parameter group per trainable parameter, as upstream builds them.

    - every group starts with ``lr = base_lr`` and ``weight_decay``;
    - parameters of normalisation layers get ``weight_decay_norm``;
    - every parameter named ``bias`` gets ``base_lr * bias_lr_factor`` and ``weight_decay_bias``
      (this wins over the normalisation rule, as upstream);
    - parameters of the top-level ``heads`` module have their LR multiplied by ``heads_lr_factor``.

    Each group carries a ``name`` (the parameter's full name) so logs and tests can find it.
    Shared parameters appear once; frozen ones (``requires_grad=False``) are left out.
    """
    defaults = {"lr": base_lr, "weight_decay": weight_decay}
    bias_overrides: dict[str, float] = {}
    if bias_lr_factor != 1.0:
        bias_overrides["lr"] = base_lr * bias_lr_factor
    if weight_decay_bias is not None:
        bias_overrides["weight_decay"] = weight_decay_bias

    groups: list[dict[str, Any]] = []
    seen: set[int] = set()
    for module_name, module in model.named_modules():
        for param_name, param in module.named_parameters(recurse=False):
            if not param.requires_grad or id(param) in seen:
                continue
            seen.add(id(param))
            hyper = dict(defaults)
            if weight_decay_norm is not None and isinstance(module, NORM_MODULE_TYPES):
                hyper["weight_decay"] = weight_decay_norm
            if param_name == "bias":
                hyper.update(bias_overrides)
            if module_name.split(".")[0] == "heads" and heads_lr_factor != 1.0:
                hyper["lr"] = hyper["lr"] * heads_lr_factor
            full_name = f"{module_name}.{param_name}" if module_name else param_name
            groups.append({"name": full_name, "params": [param], **hyper})
    return groups


def build_optimizer(cfg: CfgNode, model: nn.Module) -> torch.optim.Optimizer:
    """``SOLVER.OPT`` (SGD, Adam or AdamW from ``torch.optim``) over upstream's parameter groups.

    Gradient clipping is not part of the optimizer: the trainer applies the clipper from
    :func:`build_gradient_clipper` after (un-scaling and) backward, before ``step``.
    """
    solver = cfg.SOLVER
    params = get_default_optimizer_params(
        model,
        base_lr=solver.BASE_LR,
        weight_decay=solver.WEIGHT_DECAY,
        weight_decay_norm=solver.WEIGHT_DECAY_NORM,
        bias_lr_factor=solver.BIAS_LR_FACTOR,
        heads_lr_factor=solver.HEADS_LR_FACTOR,
        weight_decay_bias=solver.WEIGHT_DECAY_BIAS,
    )
    if not params:
        raise ValueError("The model has no trainable parameters; nothing to optimize")
    name = solver.OPT
    if name == "SGD":
        if solver.NESTEROV and solver.MOMENTUM <= 0:
            raise ConfigError("SOLVER.NESTEROV True needs SOLVER.MOMENTUM > 0")
        return torch.optim.SGD(
            params,
            lr=solver.BASE_LR,
            momentum=solver.MOMENTUM,
            nesterov=solver.NESTEROV,
            weight_decay=solver.WEIGHT_DECAY,
        )
    if name in ("Adam", "AdamW"):
        return getattr(torch.optim, name)(params, lr=solver.BASE_LR, weight_decay=solver.WEIGHT_DECAY)
    raise ConfigError(
        f"SOLVER.OPT {name!r} is not supported; use one of {', '.join(SUPPORTED_OPTIMIZERS)}"
    )


def build_lr_scheduler(
    cfg: CfgNode, optimizer: torch.optim.Optimizer, iters_per_epoch: int
) -> dict[str, torch.optim.lr_scheduler.LRScheduler]:
    """``{"lr_sched": per-epoch schedule, "warmup_sched": per-iteration warmup}`` (warmup only
    when ``SOLVER.WARMUP_ITERS`` > 0). The keys are upstream's checkpoint keys.

    The cosine schedule spans the epochs left after warmup and ``DELAY_EPOCHS``:
    ``T_max = MAX_EPOCH - max(ceil(WARMUP_ITERS / iters_per_epoch), DELAY_EPOCHS)``.
    """
    solver = cfg.SOLVER
    iters_per_epoch = max(1, int(iters_per_epoch))
    if solver.SCHED == "MultiStepLR":
        main = lr_scheduler.MultiStepLR(optimizer, milestones=list(solver.STEPS), gamma=solver.GAMMA)
    elif solver.SCHED == "CosineAnnealingLR":
        skipped = max(math.ceil(solver.WARMUP_ITERS / iters_per_epoch), solver.DELAY_EPOCHS)
        t_max = solver.MAX_EPOCH - skipped
        if t_max < 1:
            logger.warning(
                "CosineAnnealingLR has no epoch left to anneal (MAX_EPOCH %d, warmup + delay %d "
                "epochs); using T_max 1",
                solver.MAX_EPOCH,
                skipped,
            )
            t_max = 1
        main = lr_scheduler.CosineAnnealingLR(optimizer, T_max=t_max, eta_min=solver.ETA_MIN_LR)
    else:
        raise ConfigError(
            f"SOLVER.SCHED {solver.SCHED!r} is not supported; use one of {', '.join(SUPPORTED_SCHEDULERS)}"
        )
    scheds: dict[str, torch.optim.lr_scheduler.LRScheduler] = {"lr_sched": main}
    if solver.WARMUP_ITERS > 0:
        scheds["warmup_sched"] = lr_scheduler.WarmupLR(
            optimizer,
            warmup_factor=solver.WARMUP_FACTOR,
            warmup_iters=solver.WARMUP_ITERS,
            warmup_method=solver.WARMUP_METHOD,
        )
    return scheds


def build_gradient_clipper(cfg: CfgNode) -> Optional[Callable[[Iterable[torch.Tensor]], None]]:
    """A function clipping gradients as ``SOLVER.CLIP_GRADIENTS`` says, or None when disabled.

    As upstream, each parameter is clipped on its own: by value (``CLIP_TYPE value``) or by its
    own ``NORM_TYPE`` norm (``CLIP_TYPE norm``) to ``CLIP_VALUE``.
    """
    clip = copy.deepcopy(cfg.SOLVER.CLIP_GRADIENTS)
    if not clip.ENABLED:
        return None
    if clip.CLIP_TYPE == "value":

        def clip_values(params: Iterable[torch.Tensor]) -> None:
            for p in params:
                torch.nn.utils.clip_grad_value_(p, clip.CLIP_VALUE)

        return clip_values
    if clip.CLIP_TYPE == "norm":

        def clip_norms(params: Iterable[torch.Tensor]) -> None:
            for p in params:
                torch.nn.utils.clip_grad_norm_(p, clip.CLIP_VALUE, clip.NORM_TYPE)

        return clip_norms
    raise ConfigError(
        f"SOLVER.CLIP_GRADIENTS.CLIP_TYPE {clip.CLIP_TYPE!r} is not supported; use 'value' or 'norm'"
    )
