"""Process environment: safe defaults that never overwrite what the user has set."""

from __future__ import annotations

import logging
import os

from .threads import configure_threads

__all__ = ["setup_environment", "limit_worker_threads", "ROCM_VARIABLES"]

logger = logging.getLogger(__name__)

# ROCm / MIOpen / HSA variables documented by AMD. fastreid never sets or changes them; they are
# reported so a user can see what their ROCm stack runs with.
ROCM_VARIABLES = (
    "HSA_OVERRIDE_GFX_VERSION",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "MIOPEN_USER_DB_PATH",
    "MIOPEN_CUSTOM_CACHE_DIR",
    "MIOPEN_FIND_MODE",
    "MIOPEN_DEBUG_DISABLE_FIND_DB",
    "MIOPEN_LOG_LEVEL",
    "PYTORCH_ROCM_ARCH",
)


def _set_default(env: dict, name: str, value: str, changed: dict) -> None:
    if name not in env:
        env[name] = value
        changed[name] = value


def setup_environment(
    cuda_launch_blocking: bool = False,
    torch_home: str | None = None,
    environ: dict | None = None,
) -> dict[str, str]:
    """Set process-wide defaults before anything heavy is built; returns what was set.

    - ``TORCH_HOME``: ``.torch_cache`` in the working directory (pretrained weights land there).
    - ``KMP_DUPLICATE_LIB_OK=True``: two OpenMP runtimes (e.g. from numpy/MKL and torch) otherwise
      abort the process on Windows and macOS.
    - ``CUDA_LAUNCH_BLOCKING=1`` only when asked for: it makes CUDA errors point at the right line
      but slows GPU training considerably.

    A variable the user has already set is never changed; ROCm's MIOpen/HSA variables are never
    touched at all.
    """
    env = os.environ if environ is None else environ
    changed: dict[str, str] = {}
    _set_default(env, "TORCH_HOME", os.path.abspath(torch_home or ".torch_cache"), changed)
    _set_default(env, "KMP_DUPLICATE_LIB_OK", "True", changed)
    if cuda_launch_blocking:
        _set_default(env, "CUDA_LAUNCH_BLOCKING", "1", changed)
    configure_threads(environ=environ)  # OpenMP wait policy + torch threads, see fastreid/utils/threads.py
    for name, value in changed.items():
        logger.debug("environment: %s=%s", name, value)
    return changed


def limit_worker_threads(num_threads: int = 1) -> None:
    """Run in a data-loading worker process: one intra-op thread, so N workers on a machine with
    N cores do not oversubscribe it. The trainer process keeps its own thread count."""
    import torch

    os.environ["OMP_NUM_THREADS"] = str(num_threads)
    os.environ["MKL_NUM_THREADS"] = str(num_threads)
    torch.set_num_threads(num_threads)


def rocm_environment(environ: dict | None = None) -> dict[str, str]:
    """The ROCm-related variables that are set, as the user set them."""
    env = os.environ if environ is None else environ
    return {name: env[name] for name in ROCM_VARIABLES if name in env}
