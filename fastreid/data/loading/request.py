"""What the user asked for (:class:`LoaderRequest`) and what the policy decided
(:class:`LoaderDecision`): plain data, no platform logic."""

from __future__ import annotations

import dataclasses
from typing import Any

from tabulate import tabulate

__all__ = ["LoaderRequest", "LoaderDecision", "tri_state", "START_METHODS"]

START_METHODS = ("fork", "spawn", "forkserver")


def tri_state(value: Any, key: str) -> bool | str:
    """ "auto", True or False from a config value (bools or the strings auto/true/false/on/off)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered == "auto":
            return "auto"
        if lowered in ("true", "on", "yes", "1"):
            return True
        if lowered in ("false", "off", "no", "0"):
            return False
    raise ValueError(f'{key}: expected "auto", True or False, got {value!r}')


@dataclasses.dataclass
class LoaderRequest:
    """What the user asked for (``cfg.DATALOADER.*`` or ``create_dataloader`` arguments)."""

    num_workers: int = 0
    num_threads: int = 0
    mp_context: str = "auto"
    windows_safe: bool = True
    pin_memory: bool | str = "auto"
    persistent_workers: bool | str = "auto"
    prefetch_factor: int = 2
    background: bool | str = "auto"
    timeout: float = 300

    def __post_init__(self) -> None:
        for key in ("num_workers", "num_threads", "prefetch_factor"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"DATALOADER.{key.upper()}: expected an integer >= 0, got {value!r}")
        if self.prefetch_factor < 1:
            raise ValueError(
                f"DATALOADER.PREFETCH_FACTOR: expected an integer >= 1, got {self.prefetch_factor}"
            )
        if self.mp_context not in ("auto", *START_METHODS):
            raise ValueError(
                f"DATALOADER.MP_CONTEXT: expected one of 'auto', 'fork', 'spawn', 'forkserver', got {self.mp_context!r}"
            )
        if not isinstance(self.timeout, (int, float)) or self.timeout < 0:
            raise ValueError(f"DATALOADER.TIMEOUT: expected seconds >= 0, got {self.timeout!r}")
        self.pin_memory = tri_state(self.pin_memory, "DATALOADER.PIN_MEMORY")
        self.persistent_workers = tri_state(self.persistent_workers, "DATALOADER.PERSISTENT_WORKERS")
        self.background = tri_state(self.background, "DATALOADER.BACKGROUND_GENERATOR")
        self.windows_safe = bool(self.windows_safe)

    @classmethod
    def from_cfg(cls, cfg: Any, **overrides: Any) -> LoaderRequest:
        d = cfg.DATALOADER
        values = {
            "num_workers": d.NUM_WORKERS,
            "num_threads": d.NUM_THREADS,
            "mp_context": d.MP_CONTEXT,
            "windows_safe": d.WINDOWS_SAFE,
            "pin_memory": d.PIN_MEMORY,
            "persistent_workers": d.PERSISTENT_WORKERS,
            "prefetch_factor": d.PREFETCH_FACTOR,
            "background": d.BACKGROUND_GENERATOR,
            "timeout": d.TIMEOUT,
        }
        values.update(overrides)
        return cls(**values)


@dataclasses.dataclass
class LoaderDecision:
    """The settings used (what DataLoaderX carries out) and why they differ from the request.

    ``thread_prefetch``: batches in flight with thread workers (capped). ``main_guard``: check at
    each ``iter()`` that spawn / forkserver workers are not started from unguarded top-level code
    of the script (and refuse with the line to change). ``seed_global_rngs``: seed the global
    random generators from each sample's seed (a dataset without sample keys, a seed given, and
    loading in worker processes or the main process). ``main_process_timeout``: load in a helper
    thread of the main process so that ``timeout`` applies with zero workers too. ``cuda_prefetch``:
    copy batches to the (available) CUDA device on a side stream. ``mp_context``: a start method
    name, or for explicit ``DataLoaderX`` arguments the context object given.
    """

    num_workers: int
    num_threads: int
    mp_context: Any
    pin_memory: bool
    persistent_workers: bool
    prefetch_factor: int | None
    background: bool
    timeout: float
    device: str
    request: LoaderRequest
    reasons: list[str] = dataclasses.field(default_factory=list)
    warnings: list[str] = dataclasses.field(default_factory=list)
    thread_prefetch: int = 0
    main_guard: bool = False
    seed_global_rngs: bool = False
    cuda_prefetch: bool = False

    @property
    def uses_processes(self) -> bool:
        return self.num_workers > 0

    def dataloader_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for :class:`~fastreid.data.data_utils.DataLoaderX`."""
        kwargs: dict[str, Any] = {
            "num_workers": self.num_workers,
            "num_threads": self.num_threads,
            "pin_memory": self.pin_memory,
            "background": self.background,
            "timeout": self.timeout,
        }
        if self.num_workers > 0:
            kwargs["multiprocessing_context"] = self.mp_context
            kwargs["persistent_workers"] = self.persistent_workers
            kwargs["prefetch_factor"] = self.prefetch_factor
        elif self.num_threads > 0:
            kwargs["prefetch_factor"] = self.request.prefetch_factor  # batches in flight per thread
        return kwargs

    @property
    def main_process_timeout(self) -> bool:
        return self.num_workers == 0 and self.num_threads == 0 and self.timeout > 0

    def table(self) -> str:
        r = self.request
        rows = [
            ["worker processes", r.num_workers, self.num_workers],
            ["thread workers", r.num_threads, self.num_threads],
            ["start method", r.mp_context, self.mp_context or "-"],
            ["persistent workers", r.persistent_workers, self.persistent_workers],
            [
                "prefetch factor",
                r.prefetch_factor,
                self.prefetch_factor if self.prefetch_factor is not None else "-",
            ],
            ["pin memory", r.pin_memory, self.pin_memory],
            ["background generator", r.background, self.background],
            ["timeout (s)", r.timeout, self.timeout],
        ]
        if self.num_threads:
            rows.append(
                ["batches in flight (threads)", r.prefetch_factor * r.num_threads, self.thread_prefetch]
            )
        if self.seed_global_rngs:
            rows.append(["global RNGs seeded per sample", "-", True])
        text = f"Data loader settings (device {self.device}):\n" + tabulate(
            rows, headers=["setting", "requested", "used"], tablefmt="simple"
        )
        notes = [f"  ! {w}" for w in self.warnings] + [f"  - {r}" for r in self.reasons]
        return text + ("\n" + "\n".join(notes) if notes else "")
