"""Optimizer, LR schedules and gradient clipping from the config (upstream FastReID's rules)."""

from __future__ import annotations

import copy
import inspect
import logging
import math
import re
from collections.abc import Iterable, Sequence
from enum import Enum
from typing import Any, Callable, Optional, cast

import torch
from torch import nn

from fastreid.config import CfgNode, ConfigError
from fastreid.config.validate import FUSED_CHOICES

from . import lr_scheduler

__all__ = [
    "GradientClipType",
    "NORM_MODULE_TYPES",
    "maybe_add_freeze_layer",
    "maybe_add_gradient_clipping",
    "optimizer_and_wrapper",
    "SUPPORTED_OPTIMIZERS",
    "SUPPORTED_SCHEDULERS",
    "build_gradient_clipper",
    "build_lr_scheduler",
    "build_optimizer",
    "get_default_optimizer_params",
]

logger = logging.getLogger(__name__)

# Every torch.optim optimizer upstream's ``getattr(torch.optim, SOLVER.OPT)`` reaches, except the
# two that cannot train a re-ID model from dense mini-batch gradients.
_UNUSABLE_OPTIMIZERS = {
    "LBFGS": "it needs a closure re-evaluating the loss at every step",
    "SparseAdam": "it only takes sparse gradients",
    "Muon": "it only optimizes 2-D parameters (convolutions and norms are not)",
}
SUPPORTED_OPTIMIZERS = tuple(
    sorted(
        name
        for name, obj in vars(torch.optim).items()
        if isinstance(obj, type)
        and issubclass(obj, torch.optim.Optimizer)
        and obj is not torch.optim.Optimizer
        and name not in _UNUSABLE_OPTIMIZERS
    )
)
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
    base_lr: Optional[float] = None,
    weight_decay: Optional[float] = None,
    weight_decay_norm: Optional[float] = None,
    bias_lr_factor: Optional[float] = 1.0,
    heads_lr_factor: Optional[float] = 1.0,
    weight_decay_bias: Optional[float] = None,
    overrides: Optional[dict[str, dict[str, float]]] = None,
    freeze_layers: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """One parameter group per trainable parameter, as upstream builds them.

    - every group starts with ``lr = base_lr`` and ``weight_decay`` (when given);
    - parameters of normalisation layers get ``weight_decay_norm``;
    - ``overrides`` maps a parameter's own name (``bias``, ``p`` ...) to values for it; every
      parameter named ``bias`` gets ``base_lr * bias_lr_factor`` and ``weight_decay_bias`` (these
      win over the normalisation rule, as upstream);
    - parameters of the top-level ``heads`` module have their LR multiplied by ``heads_lr_factor``;
    - ``freeze_status`` is "freeze" for parameters whose full name matches (from its start) one of
      the regular expressions ``freeze_layers``, else "normal" (see :func:`maybe_add_freeze_layer`).

    Each group also carries a ``name`` (the parameter's full name) so logs and tests can find it.
    Shared parameters appear once; frozen ones (``requires_grad=False``) are left out.
    """
    overrides = {k: dict(v) for k, v in (overrides or {}).items()}
    defaults: dict[str, float] = {}
    if base_lr is not None:
        defaults["lr"] = base_lr
    if weight_decay is not None:
        defaults["weight_decay"] = weight_decay
    bias_overrides: dict[str, float] = {}
    if bias_lr_factor is not None and bias_lr_factor != 1.0:
        if base_lr is None:
            raise ValueError("get_default_optimizer_params: bias_lr_factor needs base_lr")
        bias_overrides["lr"] = base_lr * bias_lr_factor
    if weight_decay_bias is not None:
        bias_overrides["weight_decay"] = weight_decay_bias
    if bias_overrides:
        if "bias" in overrides:
            raise ValueError(
                "get_default_optimizer_params: overrides for 'bias' conflict with the bias factors"
            )
        overrides["bias"] = bias_overrides
    patterns = [re.compile(name) for name in freeze_layers or ()]

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
            hyper.update(overrides.get(param_name, {}))
            if (
                module_name.split(".")[0] == "heads"
                and heads_lr_factor is not None
                and heads_lr_factor != 1.0
            ):
                hyper["lr"] = hyper.get("lr", base_lr or 0.0) * heads_lr_factor
            full_name = f"{module_name}.{param_name}" if module_name else param_name
            frozen = any(pattern.match(full_name) for pattern in patterns)
            groups.append(
                {
                    "name": full_name,
                    "freeze_status": "freeze" if frozen else "normal",
                    "params": [param],
                    **hyper,
                }
            )
    return groups


class GradientClipType(Enum):
    """``SOLVER.CLIP_GRADIENTS.CLIP_TYPE``: clip each gradient's values, or its norm."""

    VALUE = "value"
    NORM = "norm"


_CLIPPING_CLASSES: dict[tuple, type] = {}


def maybe_add_gradient_clipping(cfg: CfgNode, optimizer: Any) -> Any:
    """``optimizer`` (a class, or an instance whose class is changed) with the gradient clipping of
    ``SOLVER.CLIP_GRADIENTS`` before every step (:func:`build_gradient_clipper`: each parameter on
    its own, as upstream); unchanged when clipping is disabled. Inside ``step``, so a GradScaler
    has unscaled the gradients before they are clipped."""
    clipper = build_gradient_clipper(cfg)
    if clipper is None:
        return optimizer
    base = type(optimizer) if isinstance(optimizer, torch.optim.Optimizer) else optimizer
    if not (isinstance(base, type) and issubclass(base, torch.optim.Optimizer)):
        raise TypeError(f"maybe_add_gradient_clipping: expected an optimizer or its class, got {optimizer!r}")
    clip = cfg.SOLVER.CLIP_GRADIENTS
    key = (base, clip.CLIP_TYPE, float(clip.CLIP_VALUE), float(clip.NORM_TYPE))
    if key not in _CLIPPING_CLASSES:

        def step(self: Any, closure: Any = None) -> Any:
            clipper(p for group in self.param_groups for p in group["params"] if p.grad is not None)
            return base.step(self, closure)

        _CLIPPING_CLASSES[key] = type(
            f"{base.__name__}WithGradientClip", (base,), {"step": torch.no_grad()(step)}
        )
    clipped = _CLIPPING_CLASSES[key]
    if isinstance(optimizer, torch.optim.Optimizer):
        optimizer.__class__ = clipped
        return optimizer
    return clipped


def maybe_add_freeze_layer(cfg: CfgNode, optimizer: Any) -> Any:
    """``optimizer`` (a class, or an instance whose class is changed) that leaves the parameter
    groups marked ``freeze_status: freeze`` (``MODEL.FREEZE_LAYERS``, see
    :func:`get_default_optimizer_params`) untouched for the first ``SOLVER.FREEZE_ITERS`` steps,
    as upstream's; unchanged when nothing is to be frozen. (This package's trainer freezes layers
    with the ``LayerFreeze`` hook instead; this is upstream's function for code that uses it.)"""
    if len(cfg.MODEL.FREEZE_LAYERS) == 0 or cfg.SOLVER.FREEZE_ITERS <= 0:
        return optimizer
    base = type(optimizer) if isinstance(optimizer, torch.optim.Optimizer) else optimizer
    freeze_iters = int(cfg.SOLVER.FREEZE_ITERS)

    @torch.no_grad()
    def step(self: Any, closure: Any = None) -> Any:
        self._freeze_steps = getattr(self, "_freeze_steps", 0) + 1
        if self._freeze_steps > freeze_iters:
            return base.step(self, closure)
        held = []
        for group in self.param_groups:
            if group.get("freeze_status") == "freeze":
                for p in group["params"]:
                    if p.grad is not None:
                        held.append((p, p.grad))
                        p.grad = None
        try:
            return base.step(self, closure)
        finally:
            for p, grad in held:
                p.grad = grad

    frozen = type(f"{base.__name__}WithFreezeLayer", (base,), {"step": step})
    if isinstance(optimizer, torch.optim.Optimizer):
        optimizer.__class__ = frozen
        return optimizer
    return frozen


class _KernelChoice:
    """The hooks :func:`build_optimizer` registers on its optimizer: the kernel (``fused`` /
    ``foreach``) is the running process's choice, never a checkpoint's.

    - loading a state dict keeps the kernel the optimizer was built with: a checkpoint written with
      another choice (or by upstream, which has none) would otherwise switch a resumed run to another
      implementation than a fresh one;
    - a state dict it gives says ``None`` (torch's default) for both, as upstream's optimizers write
      it, so code that loads it (upstream's included) keeps its own choice.

    Hooks are not pickled or deep-copied with an optimizer (torch's ``__getstate__``)."""

    KEYS = ("fused", "foreach")

    @classmethod
    def keep_built(cls, optimizer: torch.optim.Optimizer, state_dict: dict[str, Any]) -> dict[str, Any]:
        groups = [
            {**saved, **{key: built[key] for key in cls.KEYS if key in built}}
            for saved, built in zip(state_dict["param_groups"], optimizer.param_groups)
        ]
        return {**state_dict, "param_groups": groups}

    @classmethod
    def write_default(cls, optimizer: torch.optim.Optimizer, state_dict: dict[str, Any]) -> dict[str, Any]:
        for group in state_dict["param_groups"]:
            for key in cls.KEYS:
                if key in group:
                    group[key] = None
        return state_dict

    @classmethod
    def register(cls, optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
        optimizer.register_load_state_dict_pre_hook(cls.keep_built)
        optimizer.register_state_dict_post_hook(cls.write_default)
        return optimizer


def optimizer_and_wrapper(built: Any) -> tuple[torch.optim.Optimizer, Any]:
    """What a ``build_optimizer`` returned, as upstream's ``(optimizer, param_wrapper)``: an
    optimizer alone (this project's, or a subclass's override) has no wrapper."""
    if isinstance(built, torch.optim.Optimizer):
        return built, None
    if isinstance(built, (tuple, list)) and len(built) == 2 and isinstance(built[0], torch.optim.Optimizer):
        return built[0], built[1]
    raise TypeError(
        f"build_optimizer must return a torch.optim.Optimizer or an (optimizer, param_wrapper) "
        f"tuple; got {type(built).__name__}"
    )


def build_optimizer(
    cfg: CfgNode, model: nn.Module, contiguous: bool = True
) -> tuple[torch.optim.Optimizer, None]:
    """``SOLVER.OPT`` (any torch.optim optimizer by name, as upstream) over upstream's parameter
    groups. SGD gets ``MOMENTUM`` and ``NESTEROV``; every optimizer gets ``BASE_LR`` and
    ``WEIGHT_DECAY`` (per group as :func:`get_default_optimizer_params` sets them) and torch's
    defaults otherwise, as upstream.

    Returns upstream's pair ``(optimizer, param_wrapper)``: the optimizer is torch's own class
    (``torch.optim.Adam``, ...), or upstream's ``<Name>WithGradientClip`` subclass of it with
    ``SOLVER.CLIP_GRADIENTS``; ``param_wrapper`` is None, where upstream's is a ``ContiguousParams``
    (``contiguous`` is accepted for upstream's signature and has no effect: the parameters are not
    flattened, so the optimizer keeps one group per parameter). ``SOLVER.FUSED`` picks torch's fused
    kernel for CPU parameters; the optimizer keeps that choice when it loads a state dict, and writes
    none (:class:`_KernelChoice`).

    ``SOLVER.CLIP_GRADIENTS`` clips the gradients inside ``step``, as upstream's
    (:func:`maybe_add_gradient_clipping`).
    """
    solver = cfg.SOLVER
    name = solver.OPT
    if name in _UNUSABLE_OPTIMIZERS:
        raise ConfigError(
            f"SOLVER.OPT {name!r} cannot be used here: {_UNUSABLE_OPTIMIZERS[name]}; "
            f"use one of {', '.join(SUPPORTED_OPTIMIZERS)}"
        )
    if name not in SUPPORTED_OPTIMIZERS:
        raise ConfigError(
            f"SOLVER.OPT {name!r} is not supported; use one of {', '.join(SUPPORTED_OPTIMIZERS)}"
        )
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
    optimizer_cls = maybe_add_gradient_clipping(cfg, getattr(torch.optim, name))
    accepted = inspect.signature(cast(Any, optimizer_cls).__init__).parameters  # the class's own
    kwargs: dict[str, Any] = {"lr": solver.BASE_LR}
    if name == "SGD":
        if solver.NESTEROV and solver.MOMENTUM <= 0:
            raise ConfigError("SOLVER.NESTEROV True needs SOLVER.MOMENTUM > 0")
        kwargs.update(momentum=solver.MOMENTUM, nesterov=solver.NESTEROV)
    if "weight_decay" in accepted:
        kwargs["weight_decay"] = solver.WEIGHT_DECAY
    else:
        logger.warning(f"SOLVER.OPT {name} has no weight decay: SOLVER.WEIGHT_DECAY* are ignored")
    fused = solver.get("FUSED", "auto")
    if fused not in FUSED_CHOICES:
        raise ConfigError(f"SOLVER.FUSED must be one of {', '.join(FUSED_CHOICES)}; got {fused!r}")
    optimizer = None
    if "fused" in accepted and _wants_fused(fused, params):
        try:
            optimizer = optimizer_cls(params, fused=True, **kwargs)
        except (RuntimeError, ValueError) as exc:  # settings torch's fused kernel refuses at construction
            if fused == "on":
                logger.warning(
                    f"SOLVER.FUSED on: torch's fused {name} cannot be used here ({exc}); using its default"
                )
    elif fused == "on":
        logger.warning(f"SOLVER.FUSED on: torch has no fused {name}; using its default implementation")
    if optimizer is None:
        optimizer = optimizer_cls(params, **kwargs)
    return _KernelChoice.register(optimizer), None


def _wants_fused(choice: str, groups: list[dict[str, Any]]) -> bool:
    """Whether to ask torch for its fused kernel: always with ``on``; with ``auto`` where it was
    measured faster (CPU parameters: Adam's step 2.7-3.7x, SGD's 1.9-2.0x on ResNet-50, see
    benchmarks/README.md); CUDA keeps torch's default (multi-tensor) unless ``on``. With ``on``,
    a device torch has no fused kernel for is reported by torch at the first step."""
    if choice != "auto":
        return choice == "on"
    return all(p.device.type == "cpu" for group in groups for p in group["params"])


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
    main: lr_scheduler.LRScheduler
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
