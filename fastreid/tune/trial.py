"""One trial of a search: a real training run of this project (``DefaultTrainer``, its hooks and
checkpoints) whose evaluations are reported to Ray Tune, each with the checkpoint written just
before it, so that a stopped, failed or interrupted trial resumes from its last evaluation.

Runs inside a Ray worker: the config is the base config with the trial's sampled values, the
output folder is the trial's own, and the thread count is what Ray gave the trial
(``OMP_NUM_THREADS``, applied through :func:`fastreid.utils.threads.configure_threads`).
"""

from __future__ import annotations

import glob
import logging
import os
import shutil
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any, cast

from fastreid.config import CfgNode, get_cfg
from fastreid.engine import DefaultTrainer, default_setup, hooks
from fastreid.report.run import is_metric_key
from fastreid.utils.threads import configure_threads

from .space import SearchSpace

__all__ = ["TrialSpec", "TuneReportHook", "TuneTrainer", "build_trial_config", "run_trial"]

logger = logging.getLogger(__name__)

CHECKPOINT_FOLDER = "tune_checkpoint"  # inside the trial's OUTPUT_DIR: what a report hands to Tune
TUNE_CHECKPOINT = "model_tune"  # the checkpoint written after each evaluation (overwritten)


class TrialSpec(SimpleNamespace):
    """What every trial shares: ``config_file``, ``opts`` (overrides for all trials), ``space``
    (:class:`SearchSpace`) and ``metric`` (the reported metric Tune optimises)."""

    config_file: str
    opts: list[str]
    space: SearchSpace
    metric: str


def build_trial_config(spec: TrialSpec, params: dict[str, Any], output_dir: str) -> CfgNode:
    """The base config, the shared overrides, then the trial's values, writing to ``output_dir``."""
    cfg = get_cfg()
    cfg.merge_from_file(spec.config_file)
    cfg.merge_from_list(list(spec.opts))
    spec.space.apply(cfg, params)
    cfg.OUTPUT_DIR = output_dir
    return cfg


class TuneReportHook(hooks.HookBase):
    """After each evaluation (this hook runs after the evaluation hook): a checkpoint of the
    trainer as it is now (evaluation done, this hook's count included) and ``tune.report`` of the
    evaluation's metrics with that checkpoint, which a resumed trial continues from. A stopping
    scheduler (ASHA) ends the trial at a report."""

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
        from ray import tune  # the 'tune' extra; this hook only runs inside a Ray trial

        metrics.update(iteration=self.trainer.iter + 1, evaluations=self._evaluations)
        cast(DefaultTrainer, self.trainer).checkpointer.save(TUNE_CHECKPOINT, iteration=self.trainer.iter)
        folder = _checkpoint_folder(self._output_dir)
        checkpoint = tune.Checkpoint.from_directory(folder) if folder else None
        tune.report(metrics, checkpoint=checkpoint)

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


def _checkpoint_folder(output_dir: str) -> str | None:
    """A folder holding the latest checkpoint (hard-linked when possible: no copy of the weights)
    and ``last_checkpoint`` naming it; None before the first checkpoint."""
    try:
        with open(os.path.join(output_dir, "last_checkpoint"), encoding="utf-8") as f:
            name = f.read().strip()
    except FileNotFoundError:
        return None
    folder = os.path.join(output_dir, CHECKPOINT_FOLDER)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    for path in glob.glob(os.path.join(output_dir, name + "*")):  # the weights and their checksum
        target = os.path.join(folder, os.path.basename(path))
        try:
            os.link(path, target)
        except OSError:
            shutil.copy2(path, target)
    with open(os.path.join(folder, "last_checkpoint"), "w", encoding="utf-8") as f:
        f.write(name)
    return folder


class TuneTrainer(DefaultTrainer):
    """``DefaultTrainer`` with a :class:`TuneReportHook` after its evaluation hook."""

    metric = "mAP"

    def build_hooks(self) -> list:
        ret = super().build_hooks()
        report = TuneReportHook(self.cfg.OUTPUT_DIR, self.metric)
        after = max((i for i, h in enumerate(ret) if isinstance(h, hooks.EvalHook)), default=len(ret) - 1)
        ret.insert(after + 1, report)
        return ret


def _restore_checkpoint(output_dir: str) -> bool:
    """Copy the checkpoint Tune restored this trial with into ``output_dir``; True when there was one."""
    from ray import tune  # the 'tune' extra

    checkpoint = tune.get_checkpoint()
    if checkpoint is None:
        return False
    with checkpoint.as_directory() as folder:
        os.makedirs(output_dir, exist_ok=True)
        for path in glob.glob(os.path.join(folder, "*")):
            shutil.copy2(path, os.path.join(output_dir, os.path.basename(path)))
    return True


def run_trial(params: dict[str, Any], spec: TrialSpec) -> None:
    """Ray Tune's function trainable: train with ``params`` and report every evaluation."""
    from ray import tune  # the 'tune' extra

    output_dir = os.path.join(tune.get_context().get_trial_dir(), "run")
    cfg = build_trial_config(spec, params, output_dir)
    resumed = _restore_checkpoint(output_dir)
    configure_threads()  # OMP_NUM_THREADS is the trial's CPU count (Ray sets it)
    default_setup(cfg, SimpleNamespace(config_file=spec.config_file, eval_only=False, resume=resumed))
    cfg.freeze()
    logger.info(f"Trial values: {params}" + (" (resumed from its last checkpoint)" if resumed else ""))

    class Trainer(TuneTrainer):
        metric = spec.metric

    trainer = Trainer(cfg)
    trainer.resume_or_load(resume=resumed)
    trainer.train()
