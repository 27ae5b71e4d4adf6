"""``fastreid-report OUTPUT_DIR [OUTPUT_DIR ...] [-o FILE]``: the run report, one self-contained
HTML file (:func:`fastreid.report.write_report`); several folders are compared in one page.
``fastreid-train`` writes it by itself at the end of training and of ``--eval-only``
(``TEST.REPORT``)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import Any, Optional

from fastreid.utils.errors import run_tool

__all__ = ["get_parser", "main", "run", "write_run_report"]

logger = logging.getLogger(__name__)


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fastreid-report",
        description="Write the HTML report of one training/evaluation run, or compare several.",
    )
    parser.add_argument(
        "run_dirs", nargs="+", metavar="OUTPUT_DIR", help="a run's OUTPUT_DIR (several: compared)"
    )
    parser.add_argument("-o", "--output", help="the HTML file to write (default: OUTPUT_DIR/report.html)")
    parser.add_argument("--worst", type=int, default=20, help="worst queries shown (default 20)")
    parser.add_argument("--best", type=int, default=10, help="best queries shown (default 10)")
    parser.add_argument(
        "--static", action="store_true", help="static charts only (no plotting script; a much smaller file)"
    )
    return parser


def main(args: argparse.Namespace) -> str:
    from fastreid.report import write_report

    path = write_report(
        args.run_dirs,
        args.output,
        worst_queries=args.worst,
        best_queries=args.best,
        interactive=not args.static,
    )
    print(f"Report: {path}")
    return path


def write_run_report(cfg: Any) -> Optional[str]:
    """The report of the run in ``cfg.OUTPUT_DIR`` at the end of ``fastreid-train`` (``TEST.REPORT``):
    its path, or None. A report that cannot be written is a warning, never a failed run."""
    if not cfg.TEST.get("REPORT", True) or not cfg.OUTPUT_DIR:
        return None
    try:
        from fastreid.report import write_report

        path = write_report([cfg.OUTPUT_DIR])
    except Exception as e:
        logger.warning(
            f"Could not write the run report ({type(e).__name__}: {e}); the run itself is complete"
        )
        return None
    logger.info(f"Report: {path}")
    return path


def run(argv: Optional[Sequence[str]] = None) -> int:
    from fastreid.utils.logger import setup_logger

    args = get_parser().parse_args(argv)
    setup_logger(name="fastreid")
    return run_tool(lambda: main(args))


if __name__ == "__main__":
    sys.exit(run())
