"""The evaluation hooks: periodic and final evaluation (``EvalHook``) and the precise BatchNorm
statistics computed before it (``PreciseBN``); both catch up on resume with an evaluation that
the checkpoint was written before."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Callable, Optional

import torch
from torch import nn

from fastreid.utils import comm
from fastreid.utils.checkpoint import unwrap_model
from fastreid.utils.errors import UserError
from fastreid.utils.rng import rng_isolated

from .trainer_base import HookBase

__all__ = ["EvalHook", "EvaluationFailedError", "PreciseBN", "evaluation_due", "get_bn_modules"]

logger = logging.getLogger(__name__)


def get_bn_modules(model: nn.Module) -> list[nn.Module]:
    """BatchNorm modules in training mode (fvcore's helper; imported lazily, fvcore.nn is slow to import)."""
    from fvcore.nn.precise_bn import get_bn_modules as _get_bn_modules

    return _get_bn_modules(model)


class EvaluationFailedError(UserError):
    """An evaluation raised; training went on and its checkpoints are on disk (exit code 3)."""

    exit_code = 3


def evaluation_due(trainer: Any, iteration: int, period: int) -> bool:
    """Whether the epoch-end evaluation schedule (every ``period`` epochs and after the last
    one) evaluates after ``iteration``."""
    if iteration < 0 or (iteration + 1) % trainer.iters_per_epoch != 0:
        return False
    next_epoch = (iteration + 1) // trainer.iters_per_epoch
    return (period > 0 and next_epoch % period == 0) or next_epoch >= trainer.max_epoch


class EvalHook(HookBase):
    """Evaluates every ``eval_period`` epochs and after the last iteration (``eval_period`` <= 0:
    only at the end). Results go to the storage (same values on every rank).

    An evaluation that raises does not end training: its message is logged (the traceback goes
    to the log file), the failure is kept in :attr:`failures`, and the trainer reports it once
    training and its checkpoints are done. An evaluation skipped because a stop signal ended the
    run (or one the run was killed in) runs first thing after ``--resume``: the checkpoint it
    resumes from was written before it.
    """

    def __init__(self, eval_period: int, eval_function: Callable[[], Any]) -> None:
        self._period = eval_period
        self._func = eval_function
        self._last_eval_iter = -1
        self.failures: list[tuple[int, str]] = []

    def state_dict(self) -> dict[str, Any]:
        return {"last_eval_iter": self._last_eval_iter}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._last_eval_iter = int(state["last_eval_iter"])

    def pending(self) -> bool:
        """Whether the iteration before ``start_iter`` was due an evaluation that did not run."""
        last = self.trainer.start_iter - 1
        return self._last_eval_iter != last and evaluation_due(self.trainer, last, self._period)

    def before_train(self) -> None:
        pending = self.trainer.start_iter - 1
        if self.pending():
            logger.info(
                f"Running the evaluation of iteration {pending + 1}, which the checkpoint was saved before"
            )
            self.trainer.storage.iter = pending
            try:
                self._do_eval(pending)
            finally:
                self.trainer.storage.iter = self.trainer.start_iter

    def _do_eval(self, iteration: int) -> None:
        from fastreid.evaluation.testing import flatten_results_dict

        error = ""
        results: Any = None
        try:
            with rng_isolated():
                results = self._func()
            if results and not isinstance(results, Mapping):
                raise TypeError(f"The evaluation function must return a dict, got {type(results).__name__}")
        except Exception as e:
            error = " ".join(f"{type(e).__name__}: {e}".split())
            logger.debug("Traceback of the evaluation error:", exc_info=True)
        # every rank learns rank 0's results (plateau LR changes, best model) and any rank's error
        gathered = comm.all_gather((dict(results or {}), error))
        errors = [
            f"rank {r}: {err}" if len(gathered) > 1 else err for r, (_, err) in enumerate(gathered) if err
        ]
        self._last_eval_iter = iteration
        if errors:
            message = "; ".join(errors)
            self.failures.append((iteration, message))
            logger.error(
                f"Evaluation after iteration {iteration + 1} (epoch {iteration // self.trainer.iters_per_epoch + 1}) "
                f"failed: {message}. Training goes on; the checkpoints are saved."
            )
        elif gathered[0][0]:
            flat = {}
            for k, v in flatten_results_dict(gathered[0][0]).items():
                try:
                    flat[k] = float(v)
                except (TypeError, ValueError):
                    continue  # e.g. the data set's name
            self.trainer.storage.put_scalars(**flat, smoothing_hint=False)
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        comm.synchronize()

    def after_epoch(self) -> None:
        if getattr(self.trainer, "stopping", False):
            return  # runs after --resume (see before_train)
        if evaluation_due(self.trainer, self.trainer.iter, self._period):
            self._do_eval(self.trainer.iter)

    def after_train(self) -> None:
        if self.trainer.finished and self._last_eval_iter != self.trainer.iter:
            self._do_eval(self.trainer.iter)


class PreciseBN(HookBase):
    """Recomputes BatchNorm statistics over ``num_iter`` training batches with fvcore's
    ``update_bn_stats``, at the same epochs as (and before) evaluation. The loader is built on
    first use by ``data_loader_factory``."""

    def __init__(
        self, eval_period: int, model: nn.Module, data_loader_factory: Callable[[], Any], num_iter: int
    ) -> None:
        self._model = unwrap_model(model)
        self._period = eval_period
        self._factory = data_loader_factory
        self._num_iter = num_iter
        self._data_iter = None
        self._last_iter = -1
        self._disabled = not get_bn_modules(self._model)
        if self._disabled:
            logger.info("PreciseBN is disabled: the model has no BatchNorm layer in training mode")

    def state_dict(self) -> dict[str, Any]:
        return {"last_iter": self._last_iter}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._last_iter = int(state["last_iter"])

    def before_train(self) -> None:
        pending = self.trainer.start_iter - 1
        if self._last_iter != pending and evaluation_due(self.trainer, pending, self._period):
            self.update_stats(pending)  # skipped by a stop signal before the checkpoint

    def after_epoch(self) -> None:
        if not getattr(self.trainer, "stopping", False) and evaluation_due(
            self.trainer, self.trainer.iter, self._period
        ):
            self.update_stats()

    def after_train(self) -> None:
        if self.trainer.finished and self._last_iter != self.trainer.iter:
            self.update_stats()

    def update_stats(self, iteration: Optional[int] = None) -> None:
        if self._disabled:
            return
        self._last_iter = self.trainer.iter if iteration is None else iteration
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
