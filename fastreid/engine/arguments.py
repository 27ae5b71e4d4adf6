"""The command line of the training tool (upstream's arguments plus fastreid's)."""

from __future__ import annotations

import argparse

__all__ = ["default_argument_parser"]


def default_argument_parser() -> argparse.ArgumentParser:
    """Upstream's arguments plus ``--cuda-launch-blocking``; trailing ``KEY VALUE`` pairs override
    the config."""
    parser = argparse.ArgumentParser(
        description="fastreid training",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "Examples:\n"
            "  python tools/train_net.py --config-file configs/Market1501/bagtricks_R50.yml\n"
            "  python tools/train_net.py --config-file cfg.yml --resume\n"
            "  python tools/train_net.py --config-file cfg.yml --eval-only MODEL.WEIGHTS model_final.pth\n"
            "  python tools/train_net.py --config-file cfg.yml --num-gpus 2 SOLVER.IMS_PER_BATCH 128\n"
        ),
    )
    parser.add_argument("--config-file", default="", metavar="FILE", help="path to the config file")
    parser.add_argument(
        "--resume", action="store_true", help="continue from OUTPUT_DIR/last_checkpoint when it exists"
    )
    parser.add_argument("--eval-only", action="store_true", help="evaluate MODEL.WEIGHTS, no training")
    parser.add_argument(
        "--trust-checkpoint",
        action="store_true",
        help="allow checkpoint files that need full unpickling (can run code from the file); "
        "same as MODEL.TRUST_CHECKPOINT True",
    )
    parser.add_argument(
        "--num-gpus", type=int, default=1, help="processes per machine (one per GPU; gloo processes on a CPU)"
    )
    parser.add_argument("--num-machines", type=int, default=1, help="number of machines")
    parser.add_argument(
        "--machine-rank", type=int, default=0, help="rank of this machine (0 .. num-machines-1)"
    )
    parser.add_argument(
        "--dist-url",
        default="auto",
        help="rendezvous: 'auto' (free local port), tcp://HOST:PORT, or env:// under torchrun",
    )
    parser.add_argument(
        "--dist-timeout",
        type=float,
        default=30.0,
        metavar="MINUTES",
        help="how long a process waits for the others in a collective before giving up (a lost process "
        "is usually noticed at once; NCCL may need this timeout)",
    )
    parser.add_argument(
        "--break-lock",
        action="store_true",
        help="take over OUTPUT_DIR even if its lock file names a running process (one on another host "
        "that is gone); a dead process's lock on this host is taken over without it",
    )
    parser.add_argument(
        "--cuda-launch-blocking",
        action="store_true",
        help="set CUDA_LAUNCH_BLOCKING=1 (CUDA errors point at the right line; much slower)",
    )
    parser.add_argument(
        "opts", help="config overrides as KEY VALUE pairs", default=None, nargs=argparse.REMAINDER
    )
    return parser
