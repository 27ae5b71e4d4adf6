"""Printing evaluation results: upstream's ``print_csv_format`` and a readable table."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from tabulate import tabulate
from termcolor import colored

__all__ = ["print_csv_format", "results_table", "verify_results", "flatten_results_dict"]

logger = logging.getLogger(__name__)


def results_table(results: Mapping, dataset_name: str = "") -> str:
    """One-row pipe table: the dataset name then each metric (already in percent) with 2 decimals."""
    headers = ["Dataset", *results.keys()]
    row = [dataset_name, *(float(v) for v in results.values())]
    return tabulate([row], headers=headers, tablefmt="pipe", floatfmt=".2f", numalign="left")


def print_csv_format(results: Mapping) -> None:
    """Log results of one or several datasets: ``{name: {metric: value}}`` or ``{metric: value}``."""
    if not isinstance(results, Mapping) or not results:
        raise ValueError(f"results must be a non-empty mapping, got {results!r}")
    first = next(iter(results.values()))
    per_dataset = results if isinstance(first, Mapping) else {"": results}
    for name, metrics in per_dataset.items():
        logger.info("Evaluation results in csv format: \n" + colored(results_table(metrics, name), "cyan"))


def verify_results(cfg, results: Mapping) -> bool:
    """Check ``cfg.TEST.EXPECTED_RESULTS`` (list of [dataset, metric, expected, tolerance]) if present."""
    expected = getattr(cfg.TEST, "EXPECTED_RESULTS", None) or []
    ok = True
    for dataset, metric, value, tolerance in expected:
        actual = results[dataset][metric]
        if abs(actual - value) > tolerance:
            ok = False
            logger.error("%s/%s = %.4f, expected %.4f +- %.4f", dataset, metric, actual, value, tolerance)
    return ok


def flatten_results_dict(results: Mapping) -> dict:
    """``{"a": {"b": 1}}`` -> ``{"a/b": 1}`` (for writing scalars to event storage)."""
    flat = {}
    for k, v in results.items():
        if isinstance(v, Mapping):
            for kk, vv in flatten_results_dict(v).items():
                flat[f"{k}/{kk}"] = vv
        else:
            flat[k] = v
    return flat
