#!/usr/bin/env python
"""Pictures of a trained model on a test set: rank lists, CMC, ROC, distance histogram (see
``fastreid/cli/visualize.py``; installed as ``fastreid-visualize``).

    python tools/visualize_result.py --config-file configs/Market1501/bagtricks_R50.yml \
        --output logs/market/vis --num-vis 50 MODEL.WEIGHTS logs/market/model_final.pth
"""

from __future__ import annotations

import argparse
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _use_checkout() -> None:
    if REPO not in sys.path:  # a checkout used without installing the package
        sys.path.insert(0, REPO)


def get_parser() -> argparse.ArgumentParser:
    _use_checkout()
    from fastreid.cli.visualize import get_parser as parser

    return parser()


def main(args: argparse.Namespace) -> dict:
    _use_checkout()
    from fastreid.cli.visualize import main as visualize

    return visualize(args)


if __name__ == "__main__":
    _use_checkout()
    from fastreid.cli.visualize import run

    sys.exit(run())
