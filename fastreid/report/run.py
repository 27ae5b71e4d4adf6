"""What a training or evaluation run left in its OUTPUT_DIR, read for the report.

A run folder holds (each optional but the folder itself): ``config.yaml`` (the config: upstream's
keys, with fastreid's own in ``config.fastreid.yaml`` beside it, :mod:`fastreid.config.saved`),
``env.txt`` (the environment report), ``metrics.json`` (one JSON object per line: the training
scalars of each logged iteration, and each evaluation's metrics at its iteration; read with
:func:`fastreid.utils.events.read_metrics`, so a resumed run's iterations count once),
``evaluation_results.json`` (the last evaluation's metrics) and ``evaluation_details.npz`` (per-query
details, :mod:`fastreid.evaluation.details`). Nothing here writes to the folder.
"""

from __future__ import annotations

import json
import logging
import math
import os
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import yaml

from fastreid.config.saved import side_file
from fastreid.evaluation.details import DETAILS_FILE, EvaluationDetails
from fastreid.evaluation.reid_evaluation import RESULTS_FILE
from fastreid.utils.errors import UserError
from fastreid.utils.events import read_metrics

__all__ = ["METRIC_KEYS", "PSEUDO_LABELS_PREFIX", "Run", "ReportInputError", "is_metric_key", "load_run"]

logger = logging.getLogger(__name__)

# The evaluation metrics a report shows, in this order, when a run has them.
METRIC_KEYS = ("Rank-1", "Rank-5", "Rank-10", "mAP", "mINP", "metric")
_TRAINING_KEYS = ("total_loss", "lr", "time", "data_time")
#: The scalars of the unsupervised family's pseudo-label step (fastreid.projects.uda) in metrics.json.
PSEUDO_LABELS_PREFIX = "pseudo_labels/"


class ReportInputError(UserError):
    """A folder given to the report is not a run's OUTPUT_DIR (or cannot be read)."""


@dataclass
class Run:
    """One run folder's contents."""

    path: str
    name: str
    config_text: str = ""
    config: dict = field(default_factory=dict)
    env_text: str = ""
    scalars: list[dict[str, float]] = field(default_factory=list)  # training lines of metrics.json
    evaluations: list[dict[str, float]] = field(default_factory=list)  # evaluation lines, with "iteration"
    results: dict[str, float] = field(default_factory=dict)  # the last evaluation
    details: Optional[EvaluationDetails] = None
    notes: list[str] = field(default_factory=list)  # what the report must tell about its input
    # the pseudo-label step of each epoch (ClusterContrast): "iteration" and the PSEUDO_LABELS_PREFIX
    # scalars (clusters, outlier_share, NMI, ...) without the prefix
    pseudo_labels: list[dict[str, float]] = field(default_factory=list)

    def config_value(self, dotted: str, default: Any = None) -> Any:
        node: Any = self.config
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    def loss_names(self) -> list[str]:
        names = sorted({k for line in self.scalars for k in line if k.startswith("loss_")})
        return (["total_loss"] if any("total_loss" in line for line in self.scalars) else []) + names

    def metric_names(self) -> list[str]:
        """Evaluation metrics this run has, in report order: by data set (``Name/Rank-1`` when a run
        evaluates on several), known metrics first, then ``TPR@FPR=...``."""
        seen = {k for e in self.evaluations for k in e if k != "iteration"} | set(self.results)
        return sorted(seen, key=_metric_order)


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def _metric_order(key: str) -> tuple[str, int, str]:
    prefix, _, metric = key.rpartition("/")
    return prefix, METRIC_KEYS.index(metric) if metric in METRIC_KEYS else len(METRIC_KEYS), metric


def is_metric_key(key: str) -> bool:
    """``Rank-1``, ``mAP``, ``TPR@FPR=1e-04`` ..., also prefixed by a data set name (``Name/mAP``)."""
    metric = key.rpartition("/")[2]
    return metric in METRIC_KEYS or metric.startswith("TPR@")


def _is_evaluation(line: dict) -> bool:
    return any(is_metric_key(k) for k in line)


def _split_lines(lines: list[dict]) -> tuple[list[dict], list[dict]]:
    """Training lines (losses, lr, times) and evaluation lines (metrics) of ``metrics.json``; a line
    holding both (an evaluation logged with its iteration's losses) counts as both."""
    training, evaluations = [], []
    for line in lines:
        if "iteration" not in line:
            continue
        if any(k in line for k in _TRAINING_KEYS) or any(k.startswith("loss_") for k in line):
            training.append({k: v for k, v in line.items() if not is_metric_key(k)})
        if _is_evaluation(line):
            evaluations.append({k: v for k, v in line.items() if k == "iteration" or is_metric_key(k)})
    return training, evaluations


def _pseudo_label_lines(lines: list[dict]) -> list[dict]:
    """Each pseudo-label step of ``metrics.json``: its iteration and its scalars, unprefixed."""
    out = []
    for line in lines:
        found = {
            k[len(PSEUDO_LABELS_PREFIX) :]: v for k, v in line.items() if k.startswith(PSEUDO_LABELS_PREFIX)
        }
        if found and "iteration" in line:
            out.append({"iteration": line["iteration"], **found})
    return out


def load_run(path: str, name: Optional[str] = None) -> Run:
    """Read the run folder ``path``; raises :class:`ReportInputError` when it is not one."""
    if not os.path.isdir(path):
        raise ReportInputError(f"{path} is not a folder; give the OUTPUT_DIR of a training or evaluation run")
    markers = ("config.yaml", "metrics.json", RESULTS_FILE, DETAILS_FILE)
    if not any(os.path.isfile(os.path.join(path, m)) for m in markers):
        raise ReportInputError(
            f"{path} holds none of {', '.join(markers)}: it is not the OUTPUT_DIR of a run "
            "(train or evaluate with fastreid-train first)"
        )
    run = Run(path=os.path.abspath(path), name=name or os.path.basename(os.path.abspath(path)))
    config_file = os.path.join(path, "config.yaml")
    run.config_text = _read_text(config_file)
    try:
        loaded = yaml.safe_load(run.config_text) if run.config_text else {}
        run.config = loaded if isinstance(loaded, dict) else {}
    except yaml.YAMLError as e:
        logger.warning(f"{path}/config.yaml is not valid YAML ({e}); the report shows it as text")
    own_keys = _read_text(side_file(config_file))  # fastreid's keys, saved beside upstream's
    if own_keys:
        run.config_text += f"\n# ---- {os.path.basename(side_file(config_file))}\n{own_keys}"
    run.env_text = _read_text(os.path.join(path, "env.txt"))
    # one record per iteration: what a resumed run wrote again replaces what it wrote first
    lines = read_metrics(os.path.join(path, "metrics.json"))
    run.scalars, run.evaluations = _split_lines(lines)
    run.pseudo_labels = _pseudo_label_lines(lines)
    results_text = _read_text(os.path.join(path, RESULTS_FILE))
    if results_text:
        try:
            results = json.loads(results_text)
            run.results = {k: float(v) for k, v in results.items() if isinstance(v, (int, float))}
        except (json.JSONDecodeError, AttributeError):
            logger.warning(f"{path}/{RESULTS_FILE} is not a JSON object; skipped")
    if run.evaluations and (not run.results or not set(run.results) & set(run.evaluations[-1])):
        # several test sets: evaluation_results.json holds the last one's; metrics.json all of them
        run.results = {k: v for k, v in run.evaluations[-1].items() if k != "iteration"}
    details_path = os.path.join(path, DETAILS_FILE)
    if os.path.isfile(details_path):
        try:
            run.details = EvaluationDetails.load(details_path)
        except (OSError, ValueError, KeyError) as e:
            logger.warning(f"{details_path} cannot be read ({e}); the report leaves out per-query details")
    _name_the_results_test_set(run)
    _check_details_match_results(run)
    return run


def _check_details_match_results(run: Run) -> None:
    """Per-query details left by another evaluation than the metrics' (an older run in the same
    folder, a details file that could not be rewritten) would show other numbers next to them:
    such details are left out, with a note, when their Rank-1 or mAP differs from the metrics'."""
    d = run.details
    if d is None:
        return
    prefixes = [""] + ([f"{d.dataset}/"] if d.dataset else [])
    answered = d.first_match >= 0
    own = {
        "Rank-1": float(d.cmc[0]) * 100 if len(d.cmc) else math.nan,
        "mAP": float(np.mean(d.ap[answered])) * 100 if answered.any() else math.nan,
    }
    for name, value in own.items():
        shown = next((run.results[p + name] for p in prefixes if p + name in run.results), None)
        if shown is None or math.isclose(value, shown, rel_tol=0, abs_tol=1e-3):
            continue
        message = (
            f"{DETAILS_FILE} is from another evaluation than the metrics ({name} {value:.2f} there, "
            f"{shown:.2f} in the metrics); the per-query sections are left out"
        )
        logger.warning(f"{run.path}: {message}")
        run.notes.append(message)
        run.details = None
        return


def _name_the_results_test_set(run: Run) -> None:
    """An evaluation-only run on several test sets leaves only the last one's metrics (in
    ``evaluation_results.json``, unnamed); the details written with them name the set, and the
    metrics get its name as a prefix, so that they are not taken for the first set's (or all's)."""
    tests = run.config_value("DATASETS.TESTS", []) or []
    if run.evaluations or run.details is None or not run.details.dataset or len(tests) < 2:
        return
    if run.results and not any("/" in k for k in run.results):
        run.results = {f"{run.details.dataset}/{k}": v for k, v in run.results.items()}
