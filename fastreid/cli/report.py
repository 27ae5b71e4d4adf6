"""Write the HTML report of a run, or compare several (``fastreid-report``).

    fastreid-report logs/market1501/bagtricks_R50          # -> logs/market1501/bagtricks_R50/report.html
    fastreid-report logs/exp1 logs/exp2 -o compare.html    # the runs side by side
    fastreid-report logs/exp1 --static                     # no scripts: a small file, static charts

Each folder is the OUTPUT_DIR of a training or ``--eval-only`` run (what it reads:
:mod:`fastreid.report.run`). Training and ``--eval-only`` write the one-run report themselves
(``TEST.REPORT``); this command writes it again, e.g. after copying a run folder, or compares runs.
The page is one file that needs nothing else: open it in any browser, offline.
"""

from __future__ import annotations

import argparse
import os
import sys

from fastreid.utils.errors import run_tool
from fastreid.utils.logger import setup_logger
from fastreid.utils.threads import configure_openmp

__all__ = ["parse_args", "run"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="fastreid-report",
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "Examples:\n"
            "  fastreid-report logs/market1501/bagtricks_R50\n"
            "  fastreid-report logs/exp1 logs/exp2 -o compare.html\n"
        ),
    )
    parser.add_argument(
        "run_dirs", nargs="+", metavar="OUTPUT_DIR", help="a run's folder (several: compared)"
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        default=None,
        help="the HTML file to write (a folder: report.html in it); default: report.html in the run "
        "folder, or report-compare.html in the current folder for several runs",
    )
    parser.add_argument(
        "--static", action="store_true", help="no scripts: static charts only (a much smaller file)"
    )
    parser.add_argument("--worst", type=int, default=20, metavar="N", help="worst queries shown (default 20)")
    parser.add_argument("--best", type=int, default=10, metavar="N", help="best queries shown (default 10)")
    args = parser.parse_args(argv)
    if args.worst < 0 or args.best < 0:
        parser.error("--worst and --best must be >= 0")
    return args


def run(argv: list[str] | None = None) -> int:
    """The command line; returns the exit code (1 with a one-line message for a folder that is
    not a run, or a report that cannot be written)."""
    configure_openmp()  # before torch is imported (the report reads evaluation details with it)
    args = parse_args(argv)

    from fastreid.report import write_report  # imports torch: after the OpenMP decision

    setup_logger()  # warnings about the input (a cut metrics.json line, an unreadable image)

    def main() -> int:
        path = write_report(
            args.run_dirs,
            args.output,
            worst_queries=args.worst,
            best_queries=args.best,
            interactive=not args.static,
        )
        print(f"Report: {os.path.abspath(path)}", flush=True)
        return 0

    return run_tool(main)


if __name__ == "__main__":
    sys.exit(run())
