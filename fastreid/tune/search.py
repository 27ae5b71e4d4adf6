"""Hyper-parameter search on Ray Tune: every trial a real training run (:mod:`.trial`), an early-
stopping scheduler (ASHA) on the evaluations, a model-based searcher where one is installed
(Optuna, else HyperOpt, through Ray Tune's integrations), and the results as a ready-to-train
config, a table and plots.

Ray runs embedded on this machine by default (trials sized to its cores) or on a running cluster
(``address``). The search's state lives under ``<output>/<name>``: after Ctrl-C, a crash or a
killed trial, the same command with ``resume=True`` continues it; finished trials are not repeated,
interrupted ones continue from their last evaluation's checkpoint.
"""

from __future__ import annotations

import csv
import logging
import math
import os
from dataclasses import dataclass, field
from typing import Any, Optional

from fastreid.config import CfgNode, get_cfg
from fastreid.config.saved import save_config
from fastreid.utils.errors import UserError
from fastreid.utils.extras import require
from fastreid.utils.ray_cluster import init_ray
from fastreid.utils.resume_hint import COMMAND_ENV, resume_command
from fastreid.utils.threads import available_cpus
from fastreid.utils.visualizer import agg_pyplot

from .space import SearchSpace, load_search_space
from .trial import TrialSpec, build_trial_config, run_trial

__all__ = ["SearchOptions", "SearchResult", "run_search"]

logger = logging.getLogger(__name__)


@dataclass
class SearchOptions:
    """What ``fastreid-tune`` takes (see its ``--help`` for each)."""

    config_file: str
    space_file: str
    opts: list[str] = field(default_factory=list)
    metric: str = "mAP"
    mode: str = "max"
    num_samples: int = 8
    scheduler: str = "asha"  # "asha" or "fifo" (no early stopping)
    searcher: str = "auto"  # "auto", "optuna", "hyperopt" or "random"
    grace_period: int = 1  # evaluations before ASHA may stop a trial
    cpus_per_trial: Optional[int] = None
    max_concurrent: Optional[int] = None
    output: str = os.path.join("logs", "tune")
    name: str = "search"
    address: Optional[str] = None
    resume: bool = False
    seed: int = 0


@dataclass
class SearchResult:
    best_params: dict[str, Any]
    best_metrics: dict[str, Any]
    best_config: str  # path of the ready-to-train YAML
    table: str  # path of trials.csv
    plots: list[str]
    folder: str


class SearchError(UserError):
    """The search cannot start or produced no result."""


class SearchInterruptedError(UserError):
    """The search stopped before all its trials finished (Ctrl-C); its state is saved."""

    exit_code = 130


def _expected_trials(space: SearchSpace, num_samples: int) -> int:
    """Trials a complete search runs: each sample of the space, once per grid combination."""
    return num_samples * math.prod(len(d.args) for d in space.dimensions if d.kind == "grid")


def _evaluations(cfg: CfgNode) -> int:
    """How many evaluations one trial makes (ASHA's maximum time)."""
    epochs = cfg.SOLVER.MAX_EPOCH
    period = cfg.TEST.EVAL_PERIOD
    return max(1, math.ceil(epochs / period)) if period > 0 else 1


def _searcher(kind: str, space: SearchSpace, metric: str, mode: str, seed: int, max_concurrent: int):
    """The search algorithm: a model-based one where asked and installed, else Ray's random/grid
    variant generation, seeded with ``seed`` so that a search draws the same trials again (Ray
    does not apply ``max_concurrent_trials`` to a variant generator given to it: it is passed here)."""
    from ray.tune.search.basic_variant import BasicVariantGenerator  # the 'tune' extra, checked by run_search

    def variants() -> BasicVariantGenerator:
        return BasicVariantGenerator(max_concurrent=max_concurrent, random_state=seed)

    if any(d.kind == "grid" for d in space.dimensions):
        if kind not in ("auto", "random"):
            raise SearchError(f"A grid key in the space needs --searcher random (or auto), not {kind}")
        return variants()
    if kind == "random":
        return variants()
    if kind in ("auto", "optuna"):
        try:
            import optuna  # noqa: F401  (Ray's integration imports it late; fail here instead)
            from ray.tune.search.optuna import OptunaSearch  # the 'tune' extra; optuna may be absent

            return OptunaSearch(metric=metric, mode=mode, seed=seed)
        except ImportError:
            if kind == "optuna":
                require("optuna", "--searcher optuna", "tune")
    if kind in ("auto", "hyperopt"):
        try:
            import hyperopt  # noqa: F401  (optional, not in any extra; as optuna above)
            from ray.tune.search.hyperopt import HyperOptSearch  # the 'tune' extra; hyperopt may be absent

            return HyperOptSearch(metric=metric, mode=mode, random_state_seed=seed)
        except ImportError:
            if kind == "hyperopt":
                require("hyperopt", "--searcher hyperopt", "tune")
    logger.info("No model-based searcher installed (pip install optuna): sampling at random")
    return variants()


def _scheduler(kind: str, max_evaluations: int, grace_period: int):
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler  # the 'tune' extra, checked by run_search

    if kind == "fifo":
        return FIFOScheduler()
    if kind != "asha":
        raise SearchError(f"Unknown scheduler {kind!r}; use asha or fifo")
    grace = max(1, min(grace_period, max_evaluations))
    return ASHAScheduler(
        time_attr="evaluations", max_t=max_evaluations, grace_period=grace, reduction_factor=2
    )


def run_search(options: SearchOptions) -> SearchResult:
    """Run (or with ``options.resume``, continue) the search; returns where its results went."""
    ray = require("ray", "Hyper-parameter search", "tune")
    require("ray.tune", "Hyper-parameter search", "tune")
    from ray import tune  # the 'tune' extra, checked just above

    if options.mode not in ("max", "min"):
        raise SearchError(f"--mode must be max or min, got {options.mode!r}")
    space = load_search_space(options.space_file)
    base = get_cfg()
    base.merge_from_file(options.config_file)
    base.merge_from_list(list(options.opts))
    space.check_against(base)

    folder = os.path.abspath(os.path.join(options.output, options.name))
    cpus = available_cpus()
    per_trial = options.cpus_per_trial or 1
    if per_trial > cpus and not options.address:
        raise SearchError(f"--cpus-per-trial {per_trial} but this machine has {cpus} CPUs")
    spec = TrialSpec(config_file=os.path.abspath(options.config_file), opts=list(options.opts), space=space,
                     metric=options.metric, folder=folder)  # fmt: skip
    trainable = tune.with_resources(tune.with_parameters(run_trial, spec=spec), {"cpu": per_trial})

    # what a trial stopped on its own prints: this search's command
    init_ray(ray, options.address, cpus, {COMMAND_ENV: resume_command()})
    try:
        if options.resume:
            if not tune.Tuner.can_restore(folder):
                raise SearchError(f"Nothing to resume in {folder}: start the search without --resume")
            logger.info(f"Resuming the search in {folder}")
            tuner = tune.Tuner.restore(folder, trainable, resume_unfinished=True, resume_errored=True)
        else:
            if os.path.exists(os.path.join(folder, "tuner.pkl")):
                raise SearchError(
                    f"{folder} holds a search already: continue it with: {resume_command()} (or give another --name)"
                )
            concurrent = options.max_concurrent or max(1, cpus // per_trial)
            tuner = tune.Tuner(
                trainable,
                param_space=space.ray_space(),
                tune_config=tune.TuneConfig(
                    metric=options.metric,
                    mode=options.mode,
                    num_samples=options.num_samples,
                    scheduler=_scheduler(options.scheduler, _evaluations(base), options.grace_period),
                    search_alg=_searcher(
                        options.searcher, space, options.metric, options.mode, options.seed, concurrent
                    ),
                    max_concurrent_trials=concurrent,
                    # the next trial runs in the worker process of one that ended (Tune resets it;
                    # a trial still running there gets a new process): torch, this package and the
                    # data are not imported again for every trial (~6 CPU-s each); every trial sets
                    # up its logging, seed and threads itself (fastreid.tune.trial)
                    reuse_actors=True,
                ),
                run_config=tune.RunConfig(
                    name=options.name,
                    storage_path=os.path.abspath(options.output),
                    checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
                    failure_config=tune.FailureConfig(max_failures=1),
                    verbose=1,
                ),
            )
        grid = tuner.fit()
    finally:
        ray.shutdown()
    finished = grid.num_terminated + grid.num_errors
    expected = _expected_trials(space, options.num_samples)
    if finished < expected:
        raise SearchInterruptedError(
            f"The search stopped after {finished} of {expected} trials; its state is saved in {folder}. "
            f"Resume with: {resume_command()}"
        )
    return _write_results(grid, spec, options, folder)


def _write_results(grid, spec: TrialSpec, options: SearchOptions, folder: str) -> SearchResult:
    rows = []
    for result in grid:
        metrics = result.metrics or {}
        params = {k: v for k, v in (result.config or {}).items() if k in spec.space.keys}
        rows.append({"trial": metrics.get("trial_id", ""), "error": str(result.error or "")[:200], **params,
                     options.metric: metrics.get(options.metric), "evaluations": metrics.get("evaluations"),
                     "iteration": metrics.get("iteration")})  # fmt: skip
    scored = [r for r in rows if isinstance(r[options.metric], (int, float))]
    if not scored:
        raise SearchError(f"No trial reported {options.metric}; see the trials' logs under {folder}")
    best = (max if options.mode == "max" else min)(scored, key=lambda r: r[options.metric])
    best_params = {k: best[k] for k in spec.space.keys if k in best}

    os.makedirs(folder, exist_ok=True)
    table = os.path.join(folder, "trials.csv")
    with open(table, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(sorted(rows, key=lambda r: str(r["trial"])))

    cfg = build_trial_config(spec, best_params, os.path.join(options.output, options.name, "best"))
    best_config = os.path.join(folder, "best_config.yaml")
    save_config(
        cfg,
        best_config,
        header=f"the best of {len(rows)} trials: {options.metric} {best[options.metric]:.4g}; {best_params}",
    )
    plots = _plot(scored, spec.space.keys, options.metric, folder)
    logger.info(f"Best {options.metric} {best[options.metric]:.4g} with {best_params}; config: {best_config}")
    metrics = {options.metric: best[options.metric], "evaluations": best["evaluations"]}
    return SearchResult(best_params, metrics, best_config, table, plots, folder)


def _plot(rows: list[dict], keys: list[str], metric: str, folder: str) -> list[str]:
    """One scatter plot of the metric against each searched key (PNG files in ``folder``)."""
    plt = agg_pyplot()
    paths = []
    for key in keys:
        points = [(r[key], r[metric]) for r in rows if key in r]
        if not points:
            continue
        fig, ax = plt.subplots(figsize=(5, 3.5), dpi=100)
        xs = [p[0] for p in points]
        numeric = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs)
        ax.scatter(xs if numeric else [str(x) for x in xs], [p[1] for p in points])
        if numeric and min(xs) > 0 and max(xs) / min(xs) > 50:
            ax.set_xscale("log")
        ax.set_xlabel(key)
        ax.set_ylabel(metric)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        path = os.path.join(folder, f"{metric}_vs_{key}.png")
        fig.savefig(path)
        plt.close(fig)
        paths.append(path)
    return paths
