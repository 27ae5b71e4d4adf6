"""Training hooks: timing, LR schedule, checkpoints, evaluation, precise BN, layer freezing,
metric writers and plateau detection."""

from __future__ import annotations

import datetime
import logging
import math
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import Any, Callable, Optional

import torch
from fvcore.common.timer import Timer
from torch import nn

from fastreid.utils import comm
from fastreid.utils.checkpoint import (
    PeriodicCheckpointer as _PeriodicCheckpointer,
)
from fastreid.utils.checkpoint import (
    capture_rng_states,
    restore_rng_states,
    unwrap_model,
)
from fastreid.utils.events import EventWriter

from .train_loop import HookBase

__all__ = [
    "EvalHook",
    "IterationTimer",
    "LRScheduler",
    "LayerFreeze",
    "PeriodicCheckpointer",
    "PeriodicWriter",
    "PlateauHook",
    "PreciseBN",
    "flatten_results_dict",
    "get_bn_modules",
    "rng_isolated",
]

logger = logging.getLogger(__name__)


@contextmanager
def rng_isolated():
    """Run a block without disturbing the global python / numpy / torch RNG streams.

    Evaluation and precise BN build loaders (whose iterators draw a seed from torch's global RNG);
    isolating them keeps training randomness independent of how often they run, which exact
    resume relies on.
    """
    states = capture_rng_states()
    try:
        yield
    finally:
        restore_rng_states(states)


def get_bn_modules(model: nn.Module) -> list[nn.Module]:
    """BatchNorm modules in training mode (fvcore's helper; imported lazily, fvcore.nn is slow to import)."""
    from fvcore.nn.precise_bn import get_bn_modules as _get_bn_modules

    return _get_bn_modules(model)


def flatten_results_dict(results: Mapping, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a/b": 1}``."""
    flat: dict[str, Any] = {}
    for k, v in results.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            flat.update(flatten_results_dict(v, key + "/"))
        else:
            flat[key] = v
    return flat


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


class PeriodicCheckpointer(HookBase):
    """Saves a checkpoint every ``period`` epochs and at the end (``model_final.pth``), with the
    state exact resume needs: ``iteration`` (last finished), ``epoch``, RNG states. With
    ``best_metric`` set, also keeps ``model_best.pth`` for the best evaluation so far."""

    def __init__(self, checkpointer: Any, period: int, best_metric: Optional[str] = "metric", max_to_keep: Optional[int] = None) -> None:
        self._checkpointer = checkpointer
        self._period = period
        self._best_metric = best_metric
        self._max_to_keep = max_to_keep
        self._best = -math.inf
        self._final_saved = False

    def before_train(self) -> None:
        self._periodic = _PeriodicCheckpointer(
            self._checkpointer, self._period, max_iter=self.trainer.max_epoch, max_to_keep=self._max_to_keep
        )

    def _state(self) -> dict[str, Any]:
        return {"iteration": self.trainer.iter, "rng_states": capture_rng_states()}

    def _maybe_save_best(self) -> None:
        if not self._best_metric:
            return
        latest = self.trainer.storage.latest()
        key = _find_metric_key(latest, self._best_metric)
        if key is None:
            return
        value, itr = latest[key]
        if itr == self.trainer.iter and value > self._best:
            self._best = value
            # not tagged as last: --resume continues from the latest regular checkpoint
            self._checkpointer.save("model_best", tag_as_last=False, epoch=self.trainer.epoch, **self._state())

    def after_epoch(self) -> None:
        self._periodic.step(self.trainer.epoch, **self._state())
        if self.trainer.epoch >= self.trainer.max_epoch - 1:
            self._final_saved = True
        self._maybe_save_best()

    def after_train(self) -> None:
        if self.trainer.finished and not self._final_saved:
            self._checkpointer.save("model_final", epoch=self.trainer.epoch, **self._state())
            self._final_saved = True


def _find_metric_key(latest: Mapping[str, Any], name: str) -> Optional[str]:
    if name in latest:
        return name
    for k in latest:
        if k.endswith("/" + name):
            return k
    return None


class EvalHook(HookBase):
    """Evaluates every ``eval_period`` epochs and after the last iteration (``eval_period`` <= 0:
    only at the end). Results go to the storage (same values on every rank)."""

    def __init__(self, eval_period: int, eval_function: Callable[[], Any]) -> None:
        self._period = eval_period
        self._func = eval_function
        self._last_eval_iter = -1

    def _do_eval(self) -> None:
        with rng_isolated():
            results = self._func()
        # rank 0 holds the results; every rank needs them (plateau LR changes, best model)
        results = comm.all_gather(results or {})[0]
        if results:
            if not isinstance(results, Mapping):
                raise TypeError(f"The evaluation function must return a dict, got {type(results).__name__}")
            flat = {}
            for k, v in flatten_results_dict(results).items():
                try:
                    flat[k] = float(v)
                except (TypeError, ValueError):
                    continue  # e.g. the data set's name
            self.trainer.storage.put_scalars(**flat, smoothing_hint=False)
        self._last_eval_iter = self.trainer.iter
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        comm.synchronize()

    def after_epoch(self) -> None:
        next_epoch = self.trainer.epoch + 1
        is_last = next_epoch >= self.trainer.max_epoch
        if (self._period > 0 and next_epoch % self._period == 0) or is_last:
            self._do_eval()

    def after_train(self) -> None:
        if self.trainer.finished and self._last_eval_iter != self.trainer.iter:
            self._do_eval()


class PreciseBN(HookBase):
    """Recomputes BatchNorm statistics over ``num_iter`` training batches with fvcore's
    ``update_bn_stats``, at the same epochs as (and before) evaluation. The loader is built on
    first use by ``data_loader_factory``."""

    def __init__(self, eval_period: int, model: nn.Module, data_loader_factory: Callable[[], Any], num_iter: int) -> None:
        self._model = unwrap_model(model)
        self._period = eval_period
        self._factory = data_loader_factory
        self._num_iter = num_iter
        self._data_iter = None
        self._last_iter = -1
        self._disabled = not get_bn_modules(self._model)
        if self._disabled:
            logger.info("PreciseBN is disabled: the model has no BatchNorm layer in training mode")

    def after_epoch(self) -> None:
        next_epoch = self.trainer.epoch + 1
        if (self._period > 0 and next_epoch % self._period == 0) or next_epoch >= self.trainer.max_epoch:
            self.update_stats()

    def after_train(self) -> None:
        if self.trainer.finished and self._last_iter != self.trainer.iter:
            self.update_stats()

    def update_stats(self) -> None:
        if self._disabled:
            return
        self._last_iter = self.trainer.iter
        with rng_isolated():
            if self._data_iter is None:
                self._data_iter = iter(self._factory())

            def batches():
                for i in range(1, self._num_iter + 1):
                    if i % 100 == 0:
                        logger.info(f"Running precise BN ... {i}/{self._num_iter} iterations")
                    yield next(self._data_iter)

            from fvcore.nn.precise_bn import update_bn_stats

            logger.info(f"Running precise BN for {self._num_iter} iterations")
            update_bn_stats(self._model, batches(), self._num_iter)


class LayerFreeze(HookBase):
    """Keeps the named top-level modules (``MODEL.FREEZE_LAYERS``) frozen for the first
    ``freeze_iters`` iterations: in eval mode (BatchNorm statistics fixed) and without updates
    (their gradients are dropped before the optimizer step)."""

    def __init__(self, model: nn.Module, freeze_layers: Sequence[str], freeze_iters: int) -> None:
        self.model = unwrap_model(model)
        children = dict(self.model.named_children())
        unknown = [n for n in freeze_layers if n not in children]
        if unknown:
            logger.warning(
                f"MODEL.FREEZE_LAYERS names {unknown}, which the model does not have; "
                f"its top-level modules are {sorted(children)}"
            )
        self.modules = [children[n] for n in freeze_layers if n in children]
        self.freeze_layers = [n for n in freeze_layers if n in children]
        self.freeze_iters = freeze_iters
        self.is_frozen = False

    def before_step(self) -> None:
        if self.trainer.iter < self.freeze_iters:
            if not self.is_frozen:
                self.trainer.frozen_parameters = [p for m in self.modules for p in m.parameters()]
                self.is_frozen = True
                logger.info(f"Freezing {', '.join(self.freeze_layers)} for {self.freeze_iters} iterations")
            for m in self.modules:  # evaluation may have switched them back to training mode
                m.eval()
        elif self.is_frozen:
            for m in self.modules:
                m.train()
            self.trainer.frozen_parameters = []
            self.is_frozen = False
            logger.info(f"Unfreezing {', '.join(self.freeze_layers)} at iteration {self.trainer.iter}")


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


class PlateauHook(HookBase):
    """Watches an evaluation metric (higher is better). After ``patience`` evaluations without
    improvement it logs a warning and, when ``factor`` < 1, multiplies every LR by ``factor``
    (never below ``min_lr``), then starts counting again.

    Place it after :class:`EvalHook`. Its state is saved in checkpoints (``plateau``).
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

    def after_epoch(self) -> None:
        self._check()

    def after_train(self) -> None:
        if self.trainer.finished:
            self._check()

    def _check(self) -> None:
        latest = self.trainer.storage.latest()
        key = _find_metric_key(latest, self.metric)
        if key is None:
            return
        value, itr = latest[key]
        if itr != self.trainer.iter or itr == self._last_seen_iter:
            return  # no new evaluation at this iteration
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
