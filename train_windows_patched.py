#!/usr/bin/env python
"""Windows-safe training: ``python train_windows_patched.py [--resume] [--debug-cuda-errors] [train_net args]``.

The environment comes from ``fastreid.utils.env.apply_windows_safe_environment`` (the one source,
also used by ``train_windows_recommended.bat``, which runs this file); the run is
``tools/train_net.py`` with a plateau-solution config (a later ``--config-file`` wins) and
``DATALOADER.NUM_WORKERS 0``. ``--debug-cuda-errors`` (or ``DEBUG_CUDA_ERRORS=1``) sets
``CUDA_LAUNCH_BLOCKING=1``. Works on every OS.
"""

import os
import sys

REPO = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join(
    REPO, "custom_configs", "plateau_solutions", "solution_5_smaller_batch_higher_lr.yml"
)
DEBUG_SWITCH = "--debug-cuda-errors"


def build_argv(user_args: list, debug: bool = False) -> list:
    """train_net's arguments: the default config, the user's arguments, then no worker processes."""
    debug = debug or DEBUG_SWITCH in user_args
    return [
        "--config-file",
        DEFAULT_CONFIG,
        *(["--cuda-launch-blocking"] if debug else []),
        *[a for a in user_args if a != DEBUG_SWITCH],
        "DATALOADER.NUM_WORKERS",
        "0",
    ]


def main(user_args: list = None) -> int:
    user_args = sys.argv[1:] if user_args is None else user_args
    debug = DEBUG_SWITCH in user_args or os.environ.get("DEBUG_CUDA_ERRORS") == "1"
    sys.path[:0] = [p for p in (REPO, os.path.join(REPO, "tools")) if p not in sys.path]
    from fastreid.utils.env import apply_windows_safe_environment

    apply_windows_safe_environment(REPO, debug_cuda_errors=debug)
    import train_net  # tools/train_net.py; imported, so its own __main__ block does not run

    return train_net.run(build_argv(user_args, debug))


if __name__ == "__main__":
    sys.exit(main())
