"""Hooks that write checkpoints: the periodic / timed / final / on-interrupt one and the best model.

Both run *before* evaluation (see ``DefaultTrainer.build_hooks``): the weights are on disk before
anything that may fail looks at them. Their bookkeeping (the timed checkpoints kept, the best
metric so far) is hook state, saved inside every checkpoint through the trainer's ``state_dict``.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Mapping
from typing import Any, Optional

import torch

from fastreid.utils.checkpoint import PeriodicCheckpointer as _EpochCheckpointer
from fastreid.utils.checksum import discard_checksum

from .trainer_base import HookBase

__all__ = ["BestCheckpointer", "MetricHook", "PeriodicCheckpointer", "find_metric_key"]

logger = logging.getLogger(__name__)


def find_metric_key(latest: Mapping[str, Any], name: str) -> Optional[str]:
    """``name`` itself or the first ``<prefix>/name`` among the storage's latest scalars."""
    if name in latest:
        return name
    for k in latest:
        if k.endswith("/" + name):
            return k
    return None


class MetricHook(HookBase):
    """Base of hooks that act on an evaluation metric (placed after the evaluation hook):
    :meth:`on_metric` gets ``(key, value, iteration)`` for each evaluation, including one run on
    resume in ``EvalHook.before_train`` (reported for ``start_iter - 1``)."""

    metric: str = "metric"

    def on_metric(self, key: str, value: float, iteration: int) -> None:
        raise NotImplementedError

    def _check(self, iteration: int) -> None:
        latest = self.trainer.storage.latest()
        key = find_metric_key(latest, self.metric)
        if key is not None and latest[key][1] == iteration:
            self.on_metric(key, float(latest[key][0]), iteration)

    def before_train(self) -> None:
        self._check(self.trainer.start_iter - 1)

    def after_epoch(self) -> None:
        self._check(self.trainer.iter)

    def after_train(self) -> None:
        if self.trainer.finished:
            self._check(self.trainer.iter)


class PeriodicCheckpointer(HookBase):
    """Writes ``model_{epoch:04d}.pth`` every ``period`` epochs, ``model_final.pth`` at the end,
    ``model_iter{iteration:07d}.pth`` every ``minutes`` minutes of training (keeping the newest
    ``keep`` of those) and one when a stop signal ends the run. Each holds the trainer's state
    (iteration, RNG states, hook states) for exact resume, plus upstream's ``epoch`` and
    ``iteration`` entries."""

    def __init__(
        self,
        checkpointer: Any,
        period: int,
        minutes: float = 0.0,
        keep: int = 2,
        max_to_keep: Optional[int] = None,
    ) -> None:
        self._checkpointer = checkpointer
        self._period = period
        self._seconds = float(minutes) * 60.0
        self._keep = max(1, int(keep))
        self._max_to_keep = max_to_keep
        self._timed: list[str] = []  # basenames of the iteration checkpoints written, oldest first
        self._final_saved = False
        self._last_save = time.monotonic()
        self._last_saved_iter = -1

    def state_dict(self) -> dict[str, Any]:
        return {"timed": list(self._timed)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._timed = [str(name) for name in state.get("timed", [])]

    def before_train(self) -> None:
        self._epochs = _EpochCheckpointer(
            self._checkpointer, self._period, max_iter=self.trainer.max_epoch, max_to_keep=self._max_to_keep
        )
        self._last_save = time.monotonic()

    def _extra(self) -> dict[str, Any]:
        return {"iteration": int(self.trainer.iter), "epoch": int(self.trainer.epoch)}

    def _save_at_iteration(self, reason: str) -> str:
        name = f"model_iter{self.trainer.iter:07d}"
        logger.info(f"Saving a checkpoint ({reason}) after iteration {self.trainer.iter + 1}")
        self._checkpointer.save(name, **self._extra())
        self._last_save = time.monotonic()
        self._last_saved_iter = self.trainer.iter
        basename = f"{name}.pth"
        if basename in self._timed:
            self._timed.remove(basename)
        self._timed.append(basename)
        while len(self._timed) > self._keep:
            old = os.path.join(self._checkpointer.save_dir, self._timed.pop(0))
            if os.path.isfile(old):
                os.remove(old)  # a file this hook wrote itself
                discard_checksum(old)
        return os.path.join(self._checkpointer.save_dir, basename)

    def _time_is_up(self) -> bool:
        return self._seconds > 0 and time.monotonic() - self._last_save >= self._seconds

    def after_step(self) -> None:
        # at the end of an epoch, wait for after_epoch: the LR schedule steps there first
        end_of_epoch = (self.trainer.iter + 1) % self.trainer.iters_per_epoch == 0
        if not end_of_epoch and self.trainer.iter < self.trainer.max_iter - 1 and self._time_is_up():
            self._save_at_iteration(f"every {self._seconds / 60:g} minutes")

    def after_epoch(self) -> None:
        epoch = self.trainer.epoch
        is_last = epoch >= self.trainer.max_epoch - 1
        due = (self._period > 0 and (epoch + 1) % self._period == 0) or is_last
        if due:
            self._epochs.step(epoch, iteration=int(self.trainer.iter))
            self._last_save = time.monotonic()
            self._last_saved_iter = self.trainer.iter
            self._final_saved = is_last
        elif self._time_is_up() and not getattr(self.trainer, "stopping", False):
            self._save_at_iteration(f"every {self._seconds / 60:g} minutes")

    def after_train(self) -> None:
        if self.trainer.finished:
            if not self._final_saved:
                self._checkpointer.save("model_final", **self._extra())
                self._final_saved = True
        elif getattr(self.trainer, "stopped_at", None) is not None:
            if self._last_saved_iter == self.trainer.iter:  # the epoch checkpoint just written
                self.trainer.interrupt_checkpoint = self._checkpointer.get_checkpoint_file()
            else:
                self.trainer.interrupt_checkpoint = self._save_at_iteration("stop signal")


class BestCheckpointer(MetricHook):
    """Keeps ``model_best.pth`` for the best value of an evaluation metric (higher is better),
    as detectron2's hook of the same name does. Place it after the evaluation hook.

    The best value is hook state (saved in every checkpoint) and is also written into
    ``model_best.pth``; on resume the larger of the two wins, so a resumed run never replaces the
    best model by a worse one.
    """

    def __init__(self, checkpointer: Any, metric: str = "metric", file_prefix: str = "model_best") -> None:
        self._checkpointer = checkpointer
        self.metric = metric
        self._prefix = file_prefix
        self.best = -math.inf
        self.best_iter = -1

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "best_iter": self.best_iter}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.best = float(state["best"])
        self.best_iter = int(state["best_iter"])

    @property
    def path(self) -> str:
        return os.path.join(self._checkpointer.save_dir, f"{self._prefix}.pth")

    def _best_on_disk(self) -> tuple[float, int]:
        if not os.path.isfile(self.path):
            return -math.inf, -1
        try:
            saved = torch.load(self.path, map_location="cpu", weights_only=True, mmap=True)
            return float(saved.get("best_metric", -math.inf)), int(saved.get("best_iteration", -1))
        except Exception as e:  # unreadable: the state in the checkpoint decides
            logger.warning(f"Cannot read the best metric from {self.path}: {e}")
            return -math.inf, -1

    def before_train(self) -> None:
        if self.trainer.start_iter > 0:
            value, itr = self._best_on_disk()
            if value > self.best:
                logger.info(
                    f"{self.path} holds a better {self.metric} ({value:.2f}) than the checkpoint's state"
                )
                self.best, self.best_iter = value, itr
        super().before_train()  # an evaluation the resumed checkpoint was waiting for

    def on_metric(self, key: str, value: float, itr: int) -> None:
        if itr == self.best_iter or not value > self.best:
            return
        self.best, self.best_iter = float(value), int(itr)
        logger.info(f"New best {key}: {value:.2f} at iteration {itr + 1}; saving {self.path}")
        # not tagged as last: --resume continues from the latest regular checkpoint
        self._checkpointer.save(
            self._prefix,
            tag_as_last=False,
            iteration=int(itr),
            epoch=int(itr) // self.trainer.iters_per_epoch,
            best_metric=float(value),
            best_iteration=int(itr),
        )
