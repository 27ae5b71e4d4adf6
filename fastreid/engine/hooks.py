"""Training hooks: timing, LR schedule, layer freezing, metric writers and plateau detection; the
checkpointing hooks (:mod:`.checkpoint_hooks`) and evaluation hooks (:mod:`.eval_hooks`) are
re-exported here, upstream's import path."""

from __future__ import annotations

import datetime
import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from typing import Any, Optional, cast

import torch
from fvcore.common.timer import Timer
from torch import nn

from fastreid.modeling.freeze import FrozenModulesMixin, freeze_modules, unfreeze_modules
from fastreid.utils.checkpoint import unwrap_model
from fastreid.utils.events import EventWriter
from fastreid.utils.rng import rng_isolated

from .checkpoint_hooks import BestCheckpointer, MetricHook, PeriodicCheckpointer
from .eval_hooks import EvalHook, EvaluationFailedError, PreciseBN, get_bn_modules
from .trainer_base import HookBase

__all__ = [
    "BestCheckpointer",
    "EvalHook",
    "EvaluationFailedError",
    "IterationTimer",
    "LRScheduler",
    "LayerFreeze",
    "PeriodicCheckpointer",
    "PeriodicWriter",
    "PlateauHook",
    "PreciseBN",
    "get_bn_modules",
    "rng_isolated",
]

logger = logging.getLogger(__name__)


class IterationTimer(HookBase):
    """Puts ``time`` (seconds per iteration, data loading included) in the storage; the trainer
    puts ``data_time``. At the end, logs the speed and how much of it went to waiting for data."""

    def __init__(self, warmup_iter: int = 3) -> None:
        self._warmup_iter = warmup_iter
        self._step_timer = Timer()
        self._data_time = 0.0
        self._step_time = 0.0

    def before_train(self) -> None:
        self._start_time = time.perf_counter()
        self._total_timer = Timer()
        self._total_timer.pause()

    def before_step(self) -> None:
        self._step_timer.reset()
        self._total_timer.resume()

    def after_step(self) -> None:
        done = self.trainer.iter - self.trainer.start_iter + 1
        sec = self._step_timer.seconds()
        if done > self._warmup_iter:
            self.trainer.storage.put_scalar("time", sec)
            with suppress(KeyError):
                self._data_time += self.trainer.storage.history("data_time").latest()
            self._step_time += sec
        else:
            self._start_time = time.perf_counter()
            self._total_timer.reset()
        self._total_timer.pause()

    def after_train(self) -> None:
        total = time.perf_counter() - self._start_time
        in_steps = self._total_timer.seconds()
        num_iter = self.trainer.iter + 1 - self.trainer.start_iter - self._warmup_iter
        if num_iter > 0 and in_steps > 0:
            share = 100.0 * self._data_time / self._step_time if self._step_time > 0 else 0.0
            logger.info(
                f"Overall training speed: {num_iter} iterations in "
                f"{datetime.timedelta(seconds=int(in_steps))} ({in_steps / num_iter:.4f} s / it); "
                f"waiting for data: {share:.1f}% of the step time, computing: {100.0 - share:.1f}%"
            )
        logger.info(
            f"Total training time: {datetime.timedelta(seconds=int(total))} "
            f"({datetime.timedelta(seconds=int(total - in_steps))} on hooks)"
        )


class LRScheduler(HookBase):
    """Steps ``warmup_sched`` after every warmup iteration and ``lr_sched`` after every epoch
    once warmup is over and ``delay_epochs`` have passed (upstream's rules); records ``lr``."""

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        scheduler: Mapping[str, Any],
        warmup_iters: int = 0,
        delay_epochs: int = 0,
    ) -> None:
        self._optimizer = optimizer
        self._scheduler = scheduler
        self._warmup_iters = warmup_iters
        self._delay_epochs = delay_epochs
        self._scale = 0.0
        self._log_group = self._pick_param_group(optimizer)

    @staticmethod
    def _pick_param_group(optimizer: torch.optim.Optimizer) -> int:
        """The group whose LR is shown: the largest group, or with one parameter per group the
        most common LR (i.e. not a bias or heads special case)."""
        groups = optimizer.param_groups
        largest = max(len(g["params"]) for g in groups)
        if largest == 1:
            common = Counter(g["lr"] for g in groups).most_common(1)[0][0]
            return next(i for i, g in enumerate(groups) if g["lr"] == common)
        return next(i for i, g in enumerate(groups) if len(g["params"]) == largest)

    def before_step(self) -> None:
        scaler = getattr(self.trainer, "grad_scaler", None)
        if scaler is not None:
            self._scale = scaler.get_scale()

    def after_step(self) -> None:
        lr = self._optimizer.param_groups[self._log_group]["lr"]
        self.trainer.storage.put_scalar("lr", lr, smoothing_hint=False)
        warmup = self._scheduler.get("warmup_sched")
        if warmup is not None and self.trainer.iter + 1 <= self._warmup_iters:
            scaler = getattr(self.trainer, "grad_scaler", None)
            # a step the GradScaler skipped (inf gradients) does not count as warmup
            if scaler is None or self._scale == scaler.get_scale():
                warmup.step()

    def after_epoch(self) -> None:
        next_iter = self.trainer.iter + 1
        next_epoch = self.trainer.epoch + 1
        if next_iter > self._warmup_iters and next_epoch > self._delay_epochs:
            self._scheduler["lr_sched"].step()


class LayerFreeze(HookBase):
    """Keeps the named top-level modules (``MODEL.FREEZE_LAYERS``) frozen for the first
    ``freeze_iters`` iterations, through the model's own freezing
    (:mod:`fastreid.modeling.freeze`: eval mode kept across ``model.train()``), with their
    gradients dropped before the optimizer step (which works under DDP too)."""

    def __init__(self, model: nn.Module, freeze_layers: Sequence[str], freeze_iters: int) -> None:
        if not isinstance(unwrap_model(model), FrozenModulesMixin):
            raise TypeError(
                f"MODEL.FREEZE_LAYERS needs a model that supports freezing; {type(unwrap_model(model)).__name__} "
                "does not derive from fastreid.modeling.freeze.FrozenModulesMixin (Baseline does)"
            )
        self.model = model
        self.freeze_layers = list(freeze_layers)
        self.freeze_iters = freeze_iters
        self.is_frozen = False

    def before_step(self) -> None:
        if self.trainer.iter < self.freeze_iters and not self.is_frozen:
            names = freeze_modules(self.model, self.freeze_layers, stop_gradients=False)
            frozen = cast(Callable[[], list[torch.Tensor]], unwrap_model(self.model).frozen_parameters)
            self.trainer.frozen_parameters = list(frozen())
            self.is_frozen = True
            logger.info(f"Freezing {', '.join(names)} for {self.freeze_iters} iterations")
        elif self.trainer.iter >= self.freeze_iters and self.is_frozen:
            names = unfreeze_modules(self.model)
            self.trainer.frozen_parameters = []
            self.is_frozen = False
            logger.info(f"Unfreezing {', '.join(names)} at iteration {self.trainer.iter}")

    def after_train(self) -> None:
        if self.is_frozen:
            unfreeze_modules(self.model)
            self.trainer.frozen_parameters = []
            self.is_frozen = False


class PeriodicWriter(HookBase):
    """Runs the writers every ``period`` iterations, at the end of each epoch and at the end."""

    def __init__(self, writers: Sequence[EventWriter], period: int = 20) -> None:
        for w in writers:
            assert isinstance(w, EventWriter), w
        self._writers = list(writers)
        self._period = max(1, int(period))

    def _write(self) -> None:
        for w in self._writers:
            w.write()

    def after_step(self) -> None:
        if (self.trainer.iter + 1) % self._period == 0 or self.trainer.iter == self.trainer.max_iter - 1:
            self._write()

    def after_epoch(self) -> None:
        self._write()

    def after_train(self) -> None:
        self._write()
        for w in self._writers:
            w.close()


class PlateauHook(MetricHook):
    """Watches an evaluation metric (higher is better). After ``patience`` evaluations without
    improvement it logs a warning and, when ``factor`` < 1, multiplies every LR by ``factor``
    (never below ``min_lr``), then starts counting again.

    Place it after :class:`EvalHook`. Its state is part of the trainer's state in checkpoints.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        patience: int,
        factor: float = 1.0,
        min_lr: float = 0.0,
        metric: str = "metric",
        schedulers: Optional[Mapping[str, Any]] = None,
        threshold: float = 1e-4,
    ) -> None:
        if patience < 1:
            raise ValueError(f"SOLVER.PLATEAU.PATIENCE must be >= 1, got {patience}")
        if not 0 < factor <= 1:
            raise ValueError(f"SOLVER.PLATEAU.FACTOR must be in (0, 1], got {factor}")
        self._optimizer = optimizer
        self.patience = patience
        self.factor = factor
        self.min_lr = min_lr
        self.metric = metric
        self._schedulers = schedulers or {}
        self.threshold = threshold
        self.best = -math.inf
        self.best_iter = -1
        self.num_bad_evals = 0
        self.num_reductions = 0
        self._last_seen_iter = -1

    def state_dict(self) -> dict[str, Any]:
        return {
            "best": self.best,
            "best_iter": self.best_iter,
            "num_bad_evals": self.num_bad_evals,
            "num_reductions": self.num_reductions,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.best = float(state["best"])
        self.best_iter = int(state["best_iter"])
        self.num_bad_evals = int(state["num_bad_evals"])
        self.num_reductions = int(state["num_reductions"])

    def on_metric(self, key: str, value: float, itr: int) -> None:
        if itr == self._last_seen_iter:
            return  # seen already
        self._last_seen_iter = itr
        if value > self.best + self.threshold:
            self.best, self.best_iter, self.num_bad_evals = value, itr, 0
            return
        self.num_bad_evals += 1
        if self.num_bad_evals < self.patience:
            return
        self.num_bad_evals = 0
        message = (
            f"Plateau: {key} has not improved for {self.patience} evaluations "
            f"(best {self.best:.2f} at iteration {self.best_iter + 1}, now {value:.2f})"
        )
        if self.factor >= 1.0:
            logger.warning(message + "; SOLVER.PLATEAU.FACTOR < 1 would lower the LR")
            return
        self._lower_lr()
        new_lr = max(g["lr"] for g in self._optimizer.param_groups)
        logger.warning(f"{message}; LR multiplied by {self.factor} (largest LR now {new_lr:.3e})")
        self.trainer.storage.put_scalar("plateau_lr_reductions", self.num_reductions, smoothing_hint=False)

    def _lower_lr(self) -> None:
        self.num_reductions += 1
        for g in self._optimizer.param_groups:
            g["lr"] = max(g["lr"] * self.factor, self.min_lr)
        warmup = self._schedulers.get("warmup_sched")
        if warmup is not None:  # its closed form would undo the change during warmup
            warmup.base_lrs = [max(lr * self.factor, self.min_lr) for lr in warmup.base_lrs]
