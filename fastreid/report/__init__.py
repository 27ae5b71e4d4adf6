"""The run report: one self-contained HTML page of what a training or evaluation run did.

``write_report(["logs/market/bagtricks_R50"])`` reads the run folder (config, environment, the
training scalars and evaluations of ``metrics.json``, the last evaluation's per-query details) and
writes ``report.html`` into it: losses, learning rate and throughput; the metrics at each
evaluation; CMC, ROC and distance histograms; Rank-1 and mAP by query camera, the hardest
identities; the worst and best queries with their nearest gallery images. Given several run
folders, it compares them (one table, overlaid curves). ``fastreid-report`` is its command line.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Optional

from fastreid.utils.errors import UserError

from .page import render_page, write_page
from .run import ReportInputError, Run, load_run
from .sections import build_sections

__all__ = ["COMPARE_FILE", "REPORT_FILE", "ReportInputError", "Run", "load_run", "write_report"]

REPORT_FILE = "report.html"
# Several runs compared, without an output named: in the current folder (each run's own
# report.html stays as it is).
COMPARE_FILE = "report-compare.html"


def _unique_names(paths: Sequence[str]) -> list[str]:
    """Short names for the runs: the folder name, with parent folders added until they differ."""
    parts = [os.path.abspath(p).rstrip(os.sep).split(os.sep) for p in paths]
    depth = 1
    while depth < max(len(p) for p in parts):
        names = [os.sep.join(p[-depth:]) for p in parts]
        if len(set(names)) == len(names):
            return names
        depth += 1
    return [os.sep.join(p) for p in parts]


def write_report(
    run_dirs: Sequence[str],
    output: Optional[str] = None,
    *,
    worst_queries: int = 20,
    best_queries: int = 10,
    interactive: bool = True,
) -> str:
    """Write the report of ``run_dirs`` (one run, or several to compare) and return its path.

    ``output`` defaults to ``report.html`` in the run folder, or for several runs to
    ``report-compare.html`` in the current folder; an existing folder gets ``report.html`` inside
    it. ``interactive`` False leaves out the plotting library (static charts only, a much smaller
    file). Raises :class:`ReportInputError` for a folder that is not a run and for a file that
    cannot be written.
    """
    if not run_dirs:
        raise ReportInputError("No run folder given: name the OUTPUT_DIR of at least one run")
    runs: list[Run] = [load_run(path, name) for path, name in zip(run_dirs, _unique_names(run_dirs))]
    sections = build_sections(runs, worst_queries, best_queries)
    title = f"fastreid report: {runs[0].name}" if len(runs) == 1 else f"fastreid: {len(runs)} runs compared"
    subtitle = " | ".join(r.path for r in runs)
    if output:
        path = os.path.join(output, REPORT_FILE) if os.path.isdir(output) else output
    else:
        path = os.path.join(runs[0].path, REPORT_FILE) if len(runs) == 1 else COMPARE_FILE
    page = render_page(title, sections, subtitle, interactive=interactive)
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        return write_page(path, page)
    except UserError:
        raise  # a full disk says so itself
    except OSError as e:
        raise ReportInputError(
            f"cannot write the report to {path} ({e.strerror or type(e).__name__}); "
            "give a writable file with -o"
        ) from None
