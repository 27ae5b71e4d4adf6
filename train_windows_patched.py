#!/usr/bin/env python
"""Windows-safe training from Python, for those who cannot run ``train_windows_recommended.bat``.

    python train_windows_patched.py                      # the recommended plateau-solution config
    python train_windows_patched.py --resume
    python train_windows_patched.py --config-file configs/Market1501/bagtricks_R50.yml SOLVER.IMS_PER_BATCH 32

It applies what the batch file sets (TORCH_HOME, KMP_DUPLICATE_LIB_OK, OMP_NUM_THREADS, the
checkout on the import path, CUDA_LAUNCH_BLOCKING with ``--debug-cuda-errors``), adds
``DATALOADER.NUM_WORKERS 0``, and calls ``tools/train_net.py``'s entry point. Works on every OS.
"""

from __future__ import annotations

import os
import sys

REPO = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join(REPO, "custom_configs", "plateau_solutions", "solution_5_smaller_batch_higher_lr.yml")
DEBUG_SWITCH = "--debug-cuda-errors"


def apply_windows_safe_environment(environ: dict | None = None, debug_cuda_errors: bool = False) -> dict[str, str]:
    """Set the variables the batch file sets (never overriding a user's TORCH_HOME or
    OMP_NUM_THREADS); returns what was set."""
    env = os.environ if environ is None else environ
    changed: dict[str, str] = {}

    def put(name: str, value: str, override: bool = True) -> None:
        if override or name not in env:
            env[name] = value
            changed[name] = value

    put("TORCH_HOME", os.path.join(REPO, ".torch_cache"), override=False)
    put("KMP_DUPLICATE_LIB_OK", "TRUE")
    put("OMP_NUM_THREADS", str(os.cpu_count() or 1), override=False)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    put("PYTHONPATH", os.pathsep.join([REPO, *[p for p in paths if p != REPO]]))
    if debug_cuda_errors:
        put("CUDA_LAUNCH_BLOCKING", "1")
    return changed


def build_argv(user_args: list[str]) -> list[str]:
    """train_net's arguments: the default config first (a user's --config-file comes later and
    wins), the user's arguments, then ``DATALOADER.NUM_WORKERS 0``."""
    args = [a for a in user_args if a != DEBUG_SWITCH]
    argv = ["--config-file", DEFAULT_CONFIG]
    if DEBUG_SWITCH in user_args:
        argv.append("--cuda-launch-blocking")
    return [*argv, *args, "DATALOADER.NUM_WORKERS", "0"]


def main(user_args: list[str] | None = None) -> int:
    user_args = sys.argv[1:] if user_args is None else user_args
    apply_windows_safe_environment(debug_cuda_errors=DEBUG_SWITCH in user_args)
    for path in (REPO, os.path.join(REPO, "tools")):
        if path not in sys.path:
            sys.path.insert(0, path)
    import train_net  # tools/train_net.py; imported, so its own __main__ block does not run

    return train_net.run(build_argv(user_args))


if __name__ == "__main__":
    sys.exit(main())
