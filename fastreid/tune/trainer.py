"""The trainer of a search's trials: ``DefaultTrainer`` with a hook that reports each evaluation to
Ray Tune with the checkpoint written just before it (:mod:`fastreid.tune.trial` runs it in a Ray
worker; the search's driver never imports this module, nor torch)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from typing import Any, cast

from fastreid.engine import DefaultTrainer, hooks
from fastreid.report.run import is_metric_key

__all__ = ["TUNE_CHECKPOINT", "TuneReportHook", "TuneTrainer"]

TUNE_CHECKPOINT = "model_tune"  # the checkpoint handed to Tune with each report


class TuneReportHook(hooks.HookBase):
    """After each evaluation (this hook runs after the evaluation hook): a checkpoint of the
    trainer as it is now (evaluation done, this hook's count included) and ``tune.report`` of the
    evaluation's metrics with that checkpoint, which a resumed trial continues from. A stopping
    scheduler (ASHA) ends the trial at a report.

    The checkpoint is written to a temporary folder that is deleted once Tune has copied it into
    the trial's storage (``report`` returns after the copy): each trial keeps one copy of it,
    Tune's, instead of one in the run folder, one handed to Tune and Tune's."""

    def __init__(self, output_dir: str, metric: str) -> None:
        self._output_dir = output_dir
        self._metric = metric
        self._reported_iter = -1
        self._evaluations = 0

    def _latest_metrics(self) -> dict[str, float]:
        """The evaluation metrics put at this iteration (the evaluation hook has just run)."""
        latest = self.trainer.storage.latest()
        return {
            k: float(v) for k, (v, itr) in latest.items() if itr == self.trainer.iter and is_metric_key(k)
        }

    def _report(self) -> None:
        metrics = self._latest_metrics()
        if self._metric not in metrics or self.trainer.iter == self._reported_iter:
            return
        self._reported_iter = self.trainer.iter
        self._evaluations += 1
        from ray import tune  # the 'tune' extra: only a trial, inside Ray, reports

        metrics.update(iteration=self.trainer.iter + 1, evaluations=self._evaluations)
        checkpointer = cast(DefaultTrainer, self.trainer).checkpointer
        os.makedirs(self._output_dir, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".tune-checkpoint-", dir=self._output_dir) as folder:
            name = f"{TUNE_CHECKPOINT}.pth"
            checkpointer.write(os.path.join(folder, name), checkpointer.snapshot(iteration=self.trainer.iter))
            with open(os.path.join(folder, "last_checkpoint"), "w", encoding="utf-8") as f:
                f.write(name)
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(folder))

    # the count goes into the checkpoints with the trainer's state: a resumed trial continues it
    def state_dict(self) -> dict[str, int]:
        return {"evaluations": self._evaluations, "reported_iter": self._reported_iter}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._evaluations = int(state["evaluations"])
        self._reported_iter = int(state["reported_iter"])

    # the evaluation hook evaluates at epoch ends and after training; report what it put there
    def after_epoch(self) -> None:
        self._report()

    def after_train(self) -> None:
        self._report()


class TuneTrainer(DefaultTrainer):
    """``DefaultTrainer`` with a :class:`TuneReportHook` after its evaluation hook."""

    metric = "mAP"

    def build_hooks(self) -> list:
        ret = super().build_hooks()
        report = TuneReportHook(self.cfg.OUTPUT_DIR, self.metric)
        after = max((i for i, h in enumerate(ret) if isinstance(h, hooks.EvalHook)), default=len(ret) - 1)
        ret.insert(after + 1, report)
        return ret
