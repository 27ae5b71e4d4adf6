#!/usr/bin/env python
"""Train or evaluate a re-ID model from a config file (upstream FastReID's command line).

    python tools/train_net.py --config-file configs/Market1501/bagtricks_R50.yml
    python tools/train_net.py --config-file configs/Market1501/bagtricks_R50.yml --resume
    python tools/train_net.py --config-file configs/Market1501/bagtricks_R50.yml --eval-only \
        MODEL.WEIGHTS logs/market1501/bagtricks_R50/model_final.pth
    python tools/train_net.py --config-file ... --num-gpus 2        # DDP (gloo processes on a CPU)
    torchrun --nproc_per_node 2 tools/train_net.py --config-file ... --dist-url env://

The code is ``fastreid/cli/train.py``, installed as the ``fastreid-train`` command; this file runs
it from a checkout without installing. Everything runs under ``if __name__ == "__main__":`` so
that spawned processes (Windows, macOS, DDP, spawn data workers) can import this file without
starting a second training, and nothing imports torch before ``run`` has decided the OpenMP
settings (``fastreid.utils.threads.configure_openmp``).
"""

from __future__ import annotations

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _use_checkout() -> None:
    if REPO not in sys.path:  # a checkout used without installing the package
        sys.path.insert(0, REPO)


def setup(args):
    """The config and the job setup (``fastreid.cli.train.setup``), as upstream's ``setup(args)``."""
    _use_checkout()
    from fastreid.cli import train

    return train.setup(args)


def main(args):
    """One process's job (``fastreid.cli.train.main``): train, resume, or ``--eval-only``."""
    _use_checkout()
    from fastreid.cli import train

    return train.main(args)


def run(argv: list[str] | None = None) -> int:
    """The command line (``fastreid.cli.train.run``); returns the exit code."""
    _use_checkout()
    from fastreid.cli import train

    return train.run(argv)


if __name__ == "__main__":
    sys.exit(run())
