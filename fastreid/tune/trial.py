"""One trial of a search: a real training run of this project (``DefaultTrainer``, its hooks and
checkpoints) whose evaluations are reported to Ray Tune, each with the checkpoint written just
before it, so that a stopped, failed or interrupted trial resumes from its last evaluation.

Runs inside a Ray worker: the config is the base config with the trial's sampled values, the
output folder is the trial's own, and the thread count is what Ray gave the trial
(``OMP_NUM_THREADS``, applied through :func:`fastreid.utils.threads.configure_threads`).
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import shutil
from types import SimpleNamespace
from typing import Any

from fastreid.config import CfgNode, get_cfg
from fastreid.utils.threads import configure_threads

from .space import SearchSpace

__all__ = ["TrialSpec", "build_trial_config", "run_trial"]

logger = logging.getLogger(__name__)


def _tune() -> Any:
    """Ray Tune, imported where a trial uses it: only trials (inside Ray) call this."""
    from ray import tune  # the 'tune' extra (optional): fastreid.tune imports without it

    return tune


class TrialSpec(SimpleNamespace):
    """What every trial shares: ``config_file``, ``opts`` (overrides for all trials), ``space``
    (:class:`SearchSpace`), ``metric`` (the reported metric Tune optimises) and ``folder`` (the
    search's folder in its storage, holding one folder per trial)."""

    folder: str
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


def _restore_checkpoint(output_dir: str) -> list[str]:
    """Copy the checkpoint Tune restored this trial with into ``output_dir``; the paths it wrote
    there (none when Tune had no checkpoint for this trial)."""
    checkpoint = _tune().get_checkpoint()
    if checkpoint is None:
        return []
    copied = []
    with checkpoint.as_directory() as folder:
        os.makedirs(output_dir, exist_ok=True)
        for path in glob.glob(os.path.join(folder, "*")):
            target = os.path.join(output_dir, os.path.basename(path))
            shutil.copy2(path, target)
            copied.append(target)
    return copied


def _drop_restored_copy(output_dir: str, copied: list[str], last_before: str | None) -> None:
    """Once the trainer has loaded Tune's checkpoint: remove the copy from the run folder (Tune
    keeps its own) and give the folder back its own ``last_checkpoint``. A trial that Ctrl-C caught
    after its last report is restarted by ``--resume`` with nothing left to train; without this its
    run folder kept a second copy of the checkpoint, which its last_checkpoint named."""
    last = os.path.join(output_dir, "last_checkpoint")
    for path in copied:
        if path != last:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
    if last_before is None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(last)
    else:
        with open(last, "w", encoding="utf-8") as f:
            f.write(last_before)


def _read_last_checkpoint(output_dir: str) -> str | None:
    try:
        with open(os.path.join(output_dir, "last_checkpoint"), encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return None


def run_trial(params: dict[str, Any], spec: TrialSpec) -> None:
    """Ray Tune's function trainable: train with ``params`` and report every evaluation."""
    # the trainer (torch, the engine) is imported here, in the trial's Ray worker: the search's
    # driver imports this module to hand Tune this function and needs neither
    from fastreid.engine import default_setup
    from fastreid.tune.trainer import TuneTrainer  # as above: in the trial's Ray worker

    tune = _tune()
    # the run's files go to the trial's folder in the search's storage, not to the trial's working
    # folder under Ray's temporary directory (which would hold a second copy of every checkpoint)
    output_dir = os.path.join(spec.folder, os.path.basename(tune.get_context().get_trial_dir()), "run")
    cfg = build_trial_config(spec, params, output_dir)
    last_before = _read_last_checkpoint(output_dir)
    copied = _restore_checkpoint(output_dir)
    resumed = bool(copied)
    configure_threads()  # OMP_NUM_THREADS is the trial's CPU count (Ray sets it)
    default_setup(cfg, SimpleNamespace(config_file=spec.config_file, eval_only=False, resume=resumed))
    cfg.freeze()
    logger.info(f"Trial values: {params}" + (" (resumed from its last checkpoint)" if resumed else ""))

    class Trainer(TuneTrainer):
        metric = spec.metric

    trainer = Trainer(cfg)
    trainer.resume_or_load(resume=resumed)
    if resumed:
        _drop_restored_copy(output_dir, copied, last_before)
    trainer.train()
