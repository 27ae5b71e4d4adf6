"""Platform facts: operating system, CUDA / ROCm, CPUs, shared memory, multiprocessing start method.

This module and the loader policy (``fastreid.data.loading.rules``) are the only places that look
at ``sys.platform``, ``torch.version.hip`` or ``torch.cuda.is_available()`` for loader decisions.
Tests pretend to be another platform with :func:`forced_platform`.

The report of these facts with the loader settings the policy would choose on this machine is
``fastreid-platform`` (:mod:`fastreid.cli.platform`); ``python -m fastreid.utils.platform``
still runs it.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import platform as _stdlib_platform
import sys
import threading
from collections.abc import Iterator
from typing import Any

__all__ = [
    "is_windows",
    "is_macos",
    "is_linux",
    "is_rocm",
    "cuda_available",
    "cpu_count",
    "cpu_flags",
    "cpuinfo_flags",
    "shared_memory_bytes",
    "current_start_method",
    "available_start_methods",
    "preferred_start_method",
    "get_recommended_num_workers",
    "setup_multiprocessing",
    "forced_platform",
    "platform_facts",
]

logger = logging.getLogger(__name__)

_OS_NAMES = {"linux": "linux", "windows": "windows", "win32": "windows", "macos": "macos", "darwin": "macos"}

_forced: list[dict[str, Any]] = []
_forced_lock = threading.Lock()


def _forced_fact(name: str) -> Any:
    with _forced_lock:
        for facts in reversed(_forced):
            if name in facts:
                return facts[name]
    return None


@contextlib.contextmanager
def forced_platform(
    os: str | None = None,
    *,
    rocm: bool | None = None,
    cuda: bool | None = None,
    cpu_count: int | None = None,
    shm_bytes: int | None = None,
    start_method: str | None = None,
    cpu_flags: frozenset[str] | None = None,
) -> Iterator[None]:
    """Pretend to run on another platform inside the ``with`` block (for tests and the report).

    ``os`` is "linux", "windows" or "macos" ("win32"/"darwin" accepted); the other facts are
    forced only when given. Blocks nest; the innermost value of a fact wins.
    """
    facts: dict[str, Any] = {}
    if os is not None:
        if os.lower() not in _OS_NAMES:
            raise ValueError(f"forced_platform: unknown os {os!r}; use one of 'linux', 'windows', 'macos'")
        facts["os"] = _OS_NAMES[os.lower()]
    for name, value in (
        ("rocm", rocm),
        ("cuda", cuda),
        ("cpu_count", cpu_count),
        ("shm_bytes", shm_bytes),
        ("start_method", start_method),
        ("cpu_flags", cpu_flags),
    ):
        if value is not None:
            facts[name] = value
    with _forced_lock:
        _forced.append(facts)
    try:
        yield
    finally:
        with _forced_lock:
            _forced.remove(facts)


def os_name() -> str:
    """ "linux", "windows", "macos" (or ``sys.platform`` for anything else)."""
    forced = _forced_fact("os")
    if forced is not None:
        return forced
    if sys.platform.startswith("linux"):
        return "linux"
    return _OS_NAMES.get(sys.platform, sys.platform)


def is_windows() -> bool:
    return os_name() == "windows"


def is_macos() -> bool:
    return os_name() == "macos"


def is_linux() -> bool:
    return os_name() == "linux"


def _torch() -> Any:
    """torch, imported on first use: importing this module must not load it (fastreid.utils.env,
    which the console scripts import before the OpenMP decision, imports this module)."""
    import torch  # after the OpenMP decision: see the docstring

    return torch


def is_rocm() -> bool:
    """True with a ROCm (HIP) build of PyTorch, whether or not a GPU is visible."""
    forced = _forced_fact("rocm")
    if forced is not None:
        return bool(forced)
    return getattr(_torch().version, "hip", None) is not None


def cuda_available() -> bool:
    """True when a CUDA (or ROCm) device can be used by torch."""
    forced = _forced_fact("cuda")
    if forced is not None:
        return bool(forced)
    return _torch().cuda.is_available()


def cpu_count() -> int:
    """CPUs this process may run on (the affinity mask where the OS has one)."""
    forced = _forced_fact("cpu_count")
    if forced is not None:
        return int(forced)
    if hasattr(os, "sched_getaffinity"):
        with contextlib.suppress(OSError):
            return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def cpu_flags() -> frozenset[str]:
    """The instruction-set flags of this CPU as Linux names them in ``/proc/cpuinfo`` (``avx2``,
    ``avx512_vnni``, ``avx_vnni`` ...); empty where the OS does not say (macOS, Windows)."""
    forced = _forced_fact("cpu_flags")
    if forced is not None:
        return frozenset(forced)
    return cpuinfo_flags()


def cpuinfo_flags(path: str = "/proc/cpuinfo") -> frozenset[str]:
    """The first processor's flags in a ``/proc/cpuinfo`` file (x86 "flags", ARM "Features");
    empty when it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip().lower() in ("flags", "features"):
                    return frozenset(value.split())
    except OSError:
        pass
    return frozenset()


def shared_memory_bytes() -> int | None:
    """Size of /dev/shm (where worker processes put batches on Linux); None where there is none."""
    forced = _forced_fact("shm_bytes")
    if forced is not None:
        return int(forced)
    if is_windows() or not os.path.isdir("/dev/shm"):
        return None
    try:
        st = os.statvfs("/dev/shm")
    except OSError:
        return None
    return st.f_frsize * st.f_blocks


def available_start_methods() -> list[str]:
    if is_windows():
        return ["spawn"]
    if _forced_fact("os") is not None:  # a forced POSIX platform
        return ["fork", "spawn", "forkserver"] if is_linux() else ["spawn", "fork", "forkserver"]
    return list(multiprocessing.get_all_start_methods())


def current_start_method() -> str:
    """The global multiprocessing start method (the platform default if none was set yet)."""
    forced = _forced_fact("start_method")
    if forced is not None:
        return forced
    method = multiprocessing.get_start_method(allow_none=True)
    if method is not None:
        return method
    if _forced_fact("os") is not None:
        return "fork" if is_linux() else "spawn"
    return multiprocessing.get_context().get_start_method()


def preferred_start_method() -> tuple[str, str]:
    """The start method fastreid uses for worker processes here, and why."""
    if is_windows():
        return "spawn", "Windows has only spawn"
    if is_rocm():
        return "spawn", "ROCm: forked workers after HIP initialisation fail or hang"
    if is_macos():
        return "spawn", "macOS: fork is unsafe with system frameworks (Python's default is spawn)"
    return "fork", "Linux: fork starts workers at once and shares the dataset copy-on-write"


def get_recommended_num_workers() -> int:
    """0 on Windows (thread workers or none, see DATALOADER.WINDOWS_SAFE), else min(CPUs, 8)."""
    if is_windows():
        return 0
    return min(cpu_count(), 8)


def setup_multiprocessing(method: str | None = None) -> str:
    """Set the global start method (the policy's choice unless ``method`` is given); returns the
    method in effect.

    Only the first call in a process can set it; if another method was already set (by the user or
    a library), this warns and leaves it, since changing it late breaks pools already created.
    DataLoaders built by fastreid pass their own context and do not depend on this.
    """
    wanted = method or preferred_start_method()[0]
    if wanted not in available_start_methods():
        raise ValueError(
            f"start method {wanted!r} is not available here; choose one of {available_start_methods()}"
        )
    current = multiprocessing.get_start_method(allow_none=True)
    if current is None:
        multiprocessing.set_start_method(wanted)
        return wanted
    if current != wanted:
        logger.warning(
            "setup_multiprocessing: the start method is already %r; wanted %r. It is too late to change it "
            '(call setup_multiprocessing() at the start of the program, under `if __name__ == "__main__":`).',
            current,
            wanted,
        )
    return current


def _format_bytes(n: int | None) -> str:
    if n is None:
        return "n/a"
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def platform_facts() -> dict[str, str]:
    """The facts the loader policy uses, as strings for a report."""
    torch = _torch()
    cuda = cuda_available()
    facts = {
        "OS": f"{os_name()} ({_stdlib_platform.platform()})",
        "Python": sys.version.split()[0],
        "torch": torch.__version__,
        "CUDA build": str(torch.version.cuda),
        "ROCm (HIP) build": str(getattr(torch.version, "hip", None)) if is_rocm() else "no",
        "CUDA available": str(cuda),
        "GPUs": str(torch.cuda.device_count()) if cuda else "0",
        "start method (global)": current_start_method(),
        "start methods available": ", ".join(available_start_methods()),
        "preferred start method": "{} ({})".format(*preferred_start_method()),
        "CPU count": str(cpu_count()),
        "/dev/shm size": _format_bytes(shared_memory_bytes()),
        "recommended NUM_WORKERS": str(get_recommended_num_workers()),
    }
    if cuda:
        facts["GPU 0"] = torch.cuda.get_device_name(0)
    return facts


if __name__ == "__main__":
    # the old command, kept working: the report runs the loader policy, which lives above utils,
    # so it is run by name rather than imported here
    import runpy

    runpy.run_module("fastreid.cli.platform", run_name="__main__", alter_sys=True)
