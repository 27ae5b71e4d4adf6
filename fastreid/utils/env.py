"""Process environment: safe defaults that never overwrite what the user has set.

This is the single source of the environment the Windows launchers apply
(``train_windows_patched.py`` and ``train_windows_recommended.bat`` both go through
:func:`apply_windows_safe_environment`) and of :func:`enable_all_patches`, the one call the
guides this project grew out of put at the top of a training script.
"""

from __future__ import annotations

import datetime
import importlib
import importlib.util
import logging
import os
import random
from collections.abc import MutableMapping
from typing import Any

from fastreid.utils.platform import cpu_count, setup_multiprocessing
from fastreid.utils.threads import configure_threads

__all__ = [
    "seed_all_rng",
    "setup_custom_environment",
    "setup_environment",
    "limit_worker_threads",
    "rocm_environment",
    "apply_windows_safe_environment",
    "enable_all_patches",
    "setup_multiprocessing",
    "ROCM_VARIABLES",
]

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


def _set_default(
    env: MutableMapping[str, str], name: str, value: str, changed: dict[str, str], override: bool = False
) -> None:
    if override or name not in env:
        env[name] = value
        changed[name] = value


def setup_environment(
    cuda_launch_blocking: bool = False,
    torch_home: str | None = None,
    environ: MutableMapping[str, str] | None = None,
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
    _set_default(env, "KMP_DUPLICATE_LIB_OK", "TRUE", changed)
    if cuda_launch_blocking:
        _set_default(env, "CUDA_LAUNCH_BLOCKING", "1", changed)
    before = dict(env)
    configure_threads(environ=environ)  # OpenMP wait policy + torch threads, see fastreid/utils/threads.py
    changed.update({k: v for k, v in env.items() if before.get(k) != v})
    for name, value in changed.items():
        logger.debug("environment: %s=%s", name, value)
    return changed


def _torch() -> Any:
    """torch, imported on first use: importing this module must not load it (fastreid-train
    imports it before the OpenMP decision, and setup_environment sets variables torch reads once
    loaded)."""
    import torch  # after the OpenMP decision and setup_environment: see the docstring

    return torch


def limit_worker_threads(num_threads: int = 1) -> None:
    """Run in a data-loading worker process: one intra-op thread, so N workers on a machine with
    N cores do not oversubscribe it. The trainer process keeps its own thread count."""
    torch = _torch()
    os.environ["OMP_NUM_THREADS"] = str(num_threads)
    os.environ["MKL_NUM_THREADS"] = str(num_threads)
    torch.set_num_threads(num_threads)


def rocm_environment(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """The ROCm-related variables that are set, as the user set them."""
    env = os.environ if environ is None else environ
    return {name: env[name] for name in ROCM_VARIABLES if name in env}


def apply_windows_safe_environment(
    repo: str, environ: MutableMapping[str, str] | None = None, debug_cuda_errors: bool = False
) -> dict[str, str]:
    """The environment of the Windows launchers, for a checkout at ``repo``; returns what was set.

    :func:`setup_environment` with ``TORCH_HOME`` in ``repo/.torch_cache``, plus
    ``KMP_DUPLICATE_LIB_OK=TRUE`` (always: a user's FALSE would abort on the second OpenMP
    runtime), ``OMP_NUM_THREADS`` = the CPU count unless set (no worker processes, so the training
    process may use every core), ``repo`` first on ``PYTHONPATH``, and ``CUDA_LAUNCH_BLOCKING=1``
    with ``debug_cuda_errors`` (errors point at the right line; much slower).
    """
    env = os.environ if environ is None else environ
    changed = setup_environment(
        cuda_launch_blocking=debug_cuda_errors, torch_home=os.path.join(repo, ".torch_cache"), environ=env
    )
    _set_default(env, "KMP_DUPLICATE_LIB_OK", "TRUE", changed, override=True)
    _set_default(env, "OMP_NUM_THREADS", str(cpu_count()), changed)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != repo]
    _set_default(env, "PYTHONPATH", os.pathsep.join([repo, *paths]), changed, override=True)
    if debug_cuda_errors:
        _set_default(env, "CUDA_LAUNCH_BLOCKING", "1", changed, override=True)
    return changed


def enable_all_patches(
    start_method: str | None = None, environ: MutableMapping[str, str] | None = None
) -> dict[str, Any]:
    """Apply the environment defaults (:func:`setup_environment`) and the multiprocessing start
    method (:func:`setup_multiprocessing`: the platform's safe choice unless ``start_method``) in
    one call; returns ``{"environment": what was set, "start_method": the method in effect}``.

    Call it first thing under ``if __name__ == "__main__":``. ROCm variables are never set (the
    platform report shows them and what they do).
    """
    changed = setup_environment(environ=environ)
    method = setup_multiprocessing(start_method)
    logger.info("enable_all_patches: environment %s, start method %s", changed or "unchanged", method)
    return {"environment": changed, "start_method": method}


def seed_all_rng(seed: int | None = None) -> int:
    """Seed Python's, numpy's and torch's global generators with ``seed`` (None: a fresh seed,
    logged); returns the seed. (Training seeds through ``SEED`` and
    :func:`fastreid.utils.reproducibility.set_seed`; this is upstream's helper.)"""

    # not at the top: numpy's OpenBLAS reads OMP_NUM_THREADS (which setup_environment may set) when loaded
    import numpy as np

    torch = _torch()
    if seed is None:
        seed = (
            os.getpid() + int(datetime.datetime.now().strftime("%S%f")) + int.from_bytes(os.urandom(2), "big")
        ) % 2**31
        logger.info(f"Using a generated random seed {seed}")
    np.random.seed(seed)
    torch.manual_seed(seed)
    random.seed(seed)
    return seed


def setup_custom_environment(custom_module: str) -> None:
    """Import ``custom_module`` (a module name, or a path to a ``.py`` file) and call its
    ``setup_environment()`` (upstream's hook for site-specific set-up)."""
    if custom_module.endswith(".py"):
        spec = importlib.util.spec_from_file_location("fastreid.utils.env.custom_module", custom_module)
        if spec is None or spec.loader is None:
            raise ImportError(f"setup_custom_environment: cannot load {custom_module}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(custom_module)
    setup = getattr(module, "setup_environment", None)
    if not callable(setup):
        raise AttributeError(f"setup_custom_environment: {custom_module} has no callable setup_environment()")
    setup()
