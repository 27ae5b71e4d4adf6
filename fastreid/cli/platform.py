"""``fastreid-platform`` (``python -m fastreid.cli.platform``): the platform facts and the data
loader settings fastreid picks on this machine, or on another OS (``--as-os``) or a ROCm build
(``--as-rocm``) as the policy would decide there."""

from __future__ import annotations

import argparse
import sys
from typing import Optional

from fastreid.data.loading.report import platform_report
from fastreid.utils.platform import forced_platform

__all__ = ["get_parser", "main", "run"]


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fastreid-platform",
        description="Platform facts and the data loader settings fastreid picks here.",
    )
    parser.add_argument(
        "--workers", type=int, nargs="+", default=[0, 1, 2, 4, 8], help="requested worker counts to show"
    )
    parser.add_argument(
        "--as-os", choices=["linux", "windows", "macos"], help="show what the policy would pick on another OS"
    )
    parser.add_argument("--as-rocm", action="store_true", help="pretend PyTorch is a ROCm build")
    return parser


def main(argv: Optional[list[str]] = None) -> int:
    args = get_parser().parse_args(argv)
    with forced_platform(args.as_os, rocm=True if args.as_rocm else None):
        print(platform_report(tuple(args.workers)))
    return 0


run = main

if __name__ == "__main__":
    sys.exit(main())
