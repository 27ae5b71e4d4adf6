"""A table of the software and hardware a run used, saved with every training run."""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import multiprocessing as mp
import os
import platform
import re
import subprocess
import sys

import numpy as np
import torch
from tabulate import tabulate

import fastreid

from . import precision, threads

__all__ = ["collect_env_info", "collect_torch_env", "detect_compute_compatibility", "get_env_module"]


# Packages the table names without importing them, by the distributions they install as: faiss loads
# a second OpenMP runtime and takes a moment, which a training run that never searches need not pay.
_NOT_IMPORTED = {"faiss": ("faiss-cpu", "faiss-gpu", "faiss-gpu-cu12", "faiss-gpu-cu11", "faiss")}


def _version(module_name: str) -> str:
    if module_name not in sys.modules:
        for distribution in _NOT_IMPORTED.get(module_name, ()):
            with contextlib.suppress(importlib.metadata.PackageNotFoundError):
                return importlib.metadata.version(distribution)
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # an optional package, or one that fails to import
        return f"not available ({type(e).__name__})"
    return str(getattr(module, "__version__", "unknown"))


def collect_torch_env() -> str:
    """PyTorch's own build report (``torch.__config__.show()``)."""
    return torch.__config__.show()


def get_env_module() -> tuple[str, str]:
    """``("FASTREID_ENV_MODULE", its value or "<not set>")``, upstream's environment hook."""
    name = "FASTREID_ENV_MODULE"
    return name, os.environ.get(name, "<not set>")


def detect_compute_compatibility(CUDA_HOME: str | None, so_file: str) -> str:
    """The CUDA architectures (``sm_XX``) a compiled library holds, from ``cuobjdump``; the file
    name when cuobjdump is not there (no CUDA toolkit, as on a CPU-only machine)."""
    cuobjdump = os.path.join(CUDA_HOME or "", "bin", "cuobjdump")
    if not CUDA_HOME or not os.path.isfile(cuobjdump):
        return f"{so_file}; cannot find cuobjdump"
    try:
        output = subprocess.run(
            [cuobjdump, "--list-elf", so_file], capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return f"{so_file}; cannot run cuobjdump"
    arches = sorted(set(re.findall(r"\.(sm_[0-9]+)\.", output)))
    return ", ".join(arches)


def collect_env_info() -> str:
    rows = [
        ("sys.platform", sys.platform),
        ("OS", platform.platform()),
        ("Python", sys.version.replace("\n", " ")),
        ("numpy", np.__version__),
        ("fastreid", f"{fastreid.__version__} @ {os.path.dirname(fastreid.__file__)}"),
        ("PyTorch", f"{torch.__version__} @ {os.path.dirname(torch.__file__)}"),
        ("torchvision", _version("torchvision")),
        ("fvcore", _version("fvcore")),
        ("faiss", _version("faiss")),
        ("Pillow", _version("PIL")),
        ("CPU count", str(os.cpu_count())),
        ("torch threads", str(torch.get_num_threads())),
        ("thread policy", threads.describe()),
        ("CPU bfloat16", precision.describe_cpu()),
        ("start method", str(mp.get_start_method(allow_none=True) or "default")),
    ]
    hip = getattr(torch.version, "hip", None)
    rows.append(("ROCm (HIP)", str(hip) if hip else "no"))
    rows.append(("CUDA available", str(torch.cuda.is_available())))
    if torch.cuda.is_available():
        rows.append(("CUDA (torch build)", str(torch.version.cuda)))
        rows.append(("cuDNN", str(torch.backends.cudnn.version())))
        for i in range(torch.cuda.device_count()):
            rows.append((f"GPU {i}", torch.cuda.get_device_name(i)))
    for name in (
        "TORCH_HOME",
        "KMP_DUPLICATE_LIB_OK",
        "OMP_NUM_THREADS",
        "OMP_WAIT_POLICY",
        "CUDA_VISIBLE_DEVICES",
        "CUDA_LAUNCH_BLOCKING",
        "HSA_OVERRIDE_GFX_VERSION",
        "MIOPEN_USER_DB_PATH",
        "FASTREID_DATASETS",
    ):
        if name in os.environ:
            rows.append((name, os.environ[name]))
    return tabulate(rows, tablefmt="simple")


if __name__ == "__main__":
    print(collect_env_info())
