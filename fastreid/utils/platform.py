"""Platform facts: operating system, CUDA / ROCm, CPUs, shared memory, multiprocessing start method.

This module and ``fastreid.data.loader_policy`` are the only places that look at ``sys.platform``,
``torch.version.hip`` or ``torch.cuda.is_available()`` for loader decisions. Tests pretend to be
another platform with :func:`forced_platform`.

``python -m fastreid.utils.platform`` (or the ``fastreid-platform`` command) prints a report,
including the loader settings the policy would choose on this machine.
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
    "shared_memory_bytes",
    "current_start_method",
    "available_start_methods",
    "preferred_start_method",
    "get_recommended_num_workers",
    "setup_multiprocessing",
    "forced_platform",
    "platform_report",
    "main",
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
    os: str | None = None,  # noqa: A002 (reads naturally: forced_platform(os="windows"))
    *,
    rocm: bool | None = None,
    cuda: bool | None = None,
    cpu_count: int | None = None,
    shm_bytes: int | None = None,
    start_method: str | None = None,
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
    """"linux", "windows", "macos" (or ``sys.platform`` for anything else)."""
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


def is_rocm() -> bool:
    """True with a ROCm (HIP) build of PyTorch, whether or not a GPU is visible."""
    forced = _forced_fact("rocm")
    if forced is not None:
        return bool(forced)
    import torch

    return getattr(torch.version, "hip", None) is not None


def cuda_available() -> bool:
    """True when a CUDA (or ROCm) device can be used by torch."""
    forced = _forced_fact("cuda")
    if forced is not None:
        return bool(forced)
    import torch

    return torch.cuda.is_available()


def cpu_count() -> int:
    """CPUs this process may run on (the affinity mask where the OS has one)."""
    forced = _forced_fact("cpu_count")
    if forced is not None:
        return int(forced)
    if hasattr(os, "sched_getaffinity"):
        with contextlib.suppress(OSError):
            return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


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
        raise ValueError(f"start method {wanted!r} is not available here; choose one of {available_start_methods()}")
    current = multiprocessing.get_start_method(allow_none=True)
    if current is None:
        multiprocessing.set_start_method(wanted)
        return wanted
    if current != wanted:
        logger.warning(
            "setup_multiprocessing: the start method is already %r; wanted %r. It is too late to change it "
            "(call setup_multiprocessing() at the start of the program, under `if __name__ == \"__main__\":`).",
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
    import torch

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


class _ReportDataset:
    """A stand-in dataset (picklable, CPU only) for the report's policy table."""

    def __len__(self) -> int:
        return 1

    def __getitem__(self, index: int) -> int:
        return index


def platform_report(worker_counts: tuple[int, ...] = (0, 1, 2, 4, 8)) -> str:
    """A printable report: the platform facts, then the loader settings the policy picks for each
    requested number of worker processes with the default configuration."""
    from tabulate import tabulate

    from fastreid.config import get_cfg
    from fastreid.data.loader_policy import LoaderRequest, decide_loader_settings

    facts = platform_facts()
    out = [tabulate(list(facts.items()), tablefmt="simple", headers=["fact", "value"])]
    cfg = get_cfg()
    device = "cuda" if cuda_available() else "cpu"
    rows = []
    for n in worker_counts:
        request = LoaderRequest.from_cfg(cfg, num_workers=n)
        decision = decide_loader_settings(request, _ReportDataset(), device=device, check_main_guard=False)
        rows.append(
            [
                n,
                decision.num_workers,
                decision.num_threads,
                decision.mp_context or "-",
                decision.persistent_workers,
                decision.prefetch_factor if decision.prefetch_factor is not None else "-",
                decision.pin_memory,
                decision.background,
                "; ".join(decision.reasons) or "-",
            ]
        )
    headers = ["requested", "processes", "threads", "start", "persistent", "prefetch", "pin", "background", "why"]
    out.append(f"\nLoader settings the policy picks (device={device}, config defaults otherwise):")
    out.append(tabulate(rows, headers=headers, tablefmt="simple"))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="fastreid-platform", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--workers", type=int, nargs="+", default=[0, 1, 2, 4, 8], help="requested worker counts to show"
    )
    parser.add_argument(
        "--as-os", choices=["linux", "windows", "macos"], help="show what the policy would pick on another OS"
    )
    parser.add_argument("--as-rocm", action="store_true", help="pretend PyTorch is a ROCm build")
    args = parser.parse_args(argv)
    with forced_platform(args.as_os, rocm=True if args.as_rocm else None):
        print(platform_report(tuple(args.workers)))
    return 0


if __name__ == "__main__":
    # run the imported module's main(): the policy reads the forced facts of that module, not of
    # this `__main__` copy
    from fastreid.utils.platform import main as _main

    sys.exit(_main())
