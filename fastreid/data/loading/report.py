"""Reports: the decision table (logged once), ``print_dataloader_config`` and the platform report
(printed by ``fastreid-platform``, :mod:`fastreid.cli.platform`).

The platform report lives here, not in ``fastreid.utils.platform``: it runs the loader policy,
and ``fastreid.utils`` imports nothing above it.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from tabulate import tabulate

from fastreid.config import get_cfg
from fastreid.data.loading.request import LoaderDecision, LoaderRequest
from fastreid.utils.env import ROCM_VARIABLES, rocm_environment
from fastreid.utils.platform import cuda_available, is_rocm, platform_facts

__all__ = ["log_decision", "print_dataloader_config", "platform_report", "rocm_report"]

logger = logging.getLogger(__name__)

_logged: set[tuple] = set()


def log_decision(decision: LoaderDecision, log: logging.Logger | None = None) -> None:
    """Log the decision table once per distinct decision (warnings at WARNING level)."""
    key = (
        decision.num_workers,
        decision.num_threads,
        str(decision.mp_context),
        decision.pin_memory,
        decision.persistent_workers,
        decision.background,
        decision.device,
        tuple(decision.reasons),
        tuple(decision.warnings),
    )
    if key in _logged:
        return
    _logged.add(key)
    log = log or logger
    log.log(logging.WARNING if decision.warnings else logging.INFO, decision.table())


class _ReportDataset:
    """A stand-in dataset (picklable, CPU only) for tables of what the policy would pick."""

    def __len__(self) -> int:
        return 1

    def __getitem__(self, index: int) -> int:
        return index


def _policy(request: LoaderRequest, device: str | None, **options: Any) -> LoaderDecision:
    """What the policy decides for ``request`` and a stand-in dataset (no main-guard check)."""
    # imports torch: fastreid-platform (fastreid.cli.platform) answers --help and bad arguments without it
    from fastreid.data.loading.rules import decide

    return decide(request, _ReportDataset(), device=device, check_main_guard=False, **options)


def _loader_table(loader: Any) -> str:
    rows = [
        ["worker processes", getattr(loader, "num_workers", "-")],
        ["thread workers", getattr(loader, "num_threads", 0)],
        ["start method", getattr(getattr(loader, "multiprocessing_context", None), "_name", None) or "-"],
        ["persistent workers", getattr(loader, "persistent_workers", "-")],
        ["prefetch factor", getattr(loader, "prefetch_factor", "-")],
        ["pin memory", getattr(loader, "pin_memory", "-")],
        ["background generator", getattr(loader, "background", False)],
        ["device", getattr(loader, "device", None)],
    ]
    return "Data loader settings:\n" + tabulate(rows, headers=["setting", "value"], tablefmt="simple")


def print_dataloader_config(
    loader_or_decision: Any = None,
    file: Any = None,
    *,
    num_workers: int | None = None,
    batch_size: int | None = None,
    seed: int | None = None,
    shuffle: bool | None = None,
    device: str | None = None,
    **request: Any,
) -> str:
    """Print (and return) the settings of a loader, of a decision, or, given keyword arguments
    (``print_dataloader_config(num_workers=2, batch_size=32, seed=42, shuffle=True)``), those the
    policy would pick for them on this machine."""
    if loader_or_decision is None:
        workers = num_workers if num_workers is not None else LoaderRequest().num_workers
        decision = _policy(LoaderRequest(num_workers=workers, **request), device, seeded=seed is not None)
        extra = [
            f"batch size: {batch_size if batch_size is not None else '-'}",
            f"shuffle: {shuffle if shuffle is not None else '-'}",
            f"seed: {seed if seed is not None else 'none (a fresh one per run)'}",
        ]
        text = decision.table() + "\n" + "\n".join(extra)
    else:
        decision = getattr(loader_or_decision, "decision", loader_or_decision)
        text = decision.table() if isinstance(decision, LoaderDecision) else _loader_table(loader_or_decision)
    print(text, file=file if file is not None else sys.stdout)
    return text


#: What the ROCm variables do (shown, never set, by fastreid).
ROCM_VARIABLE_HELP = {
    "HSA_OVERRIDE_GFX_VERSION": "makes ROCm treat the GPU as another gfx target (e.g. 10.3.0 for consumer "
    "RDNA2 cards that ROCm does not list); wrong values crash or compute garbage",
    "HIP_VISIBLE_DEVICES": "which GPUs HIP programs see (like CUDA_VISIBLE_DEVICES)",
    "ROCR_VISIBLE_DEVICES": "which GPUs the ROCm runtime exposes, below HIP",
    "MIOPEN_USER_DB_PATH": "where MIOpen keeps its tuned-kernel database (needs to be writable)",
    "MIOPEN_CUSTOM_CACHE_DIR": "where MIOpen caches compiled kernels",
    "MIOPEN_FIND_MODE": "how hard MIOpen searches for the fastest convolution (FAST / NORMAL / ...); "
    "a slower search gives faster training after the first iterations",
    "MIOPEN_DEBUG_DISABLE_FIND_DB": "1 ignores MIOpen's find database (debugging only; slow)",
    "MIOPEN_LOG_LEVEL": "MIOpen's logging verbosity (0-7)",
    "PYTORCH_ROCM_ARCH": "gfx targets to compile PyTorch extensions for",
}


def rocm_report(environ: dict | None = None) -> str:
    """The ROCm variables, set or not, and what each does; fastreid never sets them."""
    values = rocm_environment(environ)
    rows = [
        [name, values.get(name, "(not set)"), ROCM_VARIABLE_HELP.get(name, "")] for name in ROCM_VARIABLES
    ]
    title = (
        "ROCm environment (shown, never set by fastreid"
        + ("" if is_rocm() else "; this is not a ROCm build")
        + "):"
    )
    return title + "\n" + tabulate(rows, headers=["variable", "value", "what it does"], tablefmt="simple")


def platform_report(worker_counts: tuple[int, ...] = (0, 1, 2, 4, 8)) -> str:
    """The platform facts, the ROCm variables, then the loader settings the policy picks for each
    requested number of worker processes with the default configuration."""
    facts = platform_facts()
    out = [tabulate(list(facts.items()), tablefmt="simple", headers=["fact", "value"]), "", rocm_report()]
    cfg = get_cfg()
    device = "cuda" if cuda_available() else "cpu"
    rows = []
    for n in worker_counts:
        request = LoaderRequest.from_cfg(cfg, num_workers=n)
        decision = _policy(request, device)
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
    headers = [
        "requested",
        "processes",
        "threads",
        "start",
        "persistent",
        "prefetch",
        "pin",
        "background",
        "why",
    ]
    out.append(f"\nLoader settings the policy picks (device={device}, config defaults otherwise):")
    out.append(tabulate(rows, headers=headers, tablefmt="simple"))
    return "\n".join(out)
