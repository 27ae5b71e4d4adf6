"""The loader policy: which worker processes, threads, start method and memory settings to use.

Together with ``fastreid.utils.platform`` (the facts) this is the only place that decides on
platform matters. Input: what the user asked for (:class:`LoaderRequest`, usually from
``cfg.DATALOADER``), the dataset, its collate and worker-init functions, and the device. Output:
a :class:`LoaderDecision` with the settings actually used and the reasons, logged once.

The rules:

- Windows with ``WINDOWS_SAFE``: no worker processes (error 1455, pickling errors, re-spawn
  costs); thread workers when ``NUM_THREADS`` > 0, else loading in the main process.
  ``WINDOWS_SAFE False``: persistent spawn workers.
- Start method "auto": spawn on Windows, macOS and ROCm; fork on Linux.
- ``prefetch_factor``, ``persistent_workers`` and ``timeout`` only with worker processes (torch
  rejects them otherwise); pinned memory only when batches go to a CUDA device.
- Worker processes are not used when the dataset (or collate / worker-init function) holds
  tensors or modules on a non-CPU device, or, for spawn / forkserver, cannot be pickled, is
  defined in an interactive ``__main__``, or when the loader is started from the top level of a
  script without ``if __name__ == "__main__":``. Thread workers are used instead, with a warning
  naming the attribute (``dataset.sr_model: module on cuda:0``) or the line to change.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import io
import logging
import multiprocessing
import multiprocessing.context
import multiprocessing.reduction
import os
import pickle
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import BatchSampler, RandomSampler, SequentialSampler

from fastreid.utils.platform import (
    available_start_methods,
    cpu_count,
    cuda_available,
    get_recommended_num_workers,
    is_linux,
    is_rocm,
    is_windows,
    preferred_start_method,
    shared_memory_bytes,
)

__all__ = [
    "LoaderRequest",
    "LoaderDecision",
    "decide_loader_settings",
    "build_dataloader",
    "create_dataloader",
    "print_dataloader_config",
    "get_recommended_num_workers",
    "is_windows",
    "find_worker_state_problems",
    "find_unguarded_main_call",
    "resolve_background",
    "uses_cuda",
]

logger = logging.getLogger(__name__)

_START_METHODS = ("fork", "spawn", "forkserver")
_SMALL_SHM_BYTES = 256 * 2**20


# --------------------------------------------------------------------------------------------
# Request and decision
# --------------------------------------------------------------------------------------------
def _tri_state(value: Any, key: str) -> bool | str:
    """"auto", True or False from a config value (bools or the strings auto/true/false/on/off)."""
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
    raise ValueError(f"{key}: expected \"auto\", True or False, got {value!r}")


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
            raise ValueError(f"DATALOADER.PREFETCH_FACTOR: expected an integer >= 1, got {self.prefetch_factor}")
        if self.mp_context not in ("auto", *_START_METHODS):
            raise ValueError(
                f"DATALOADER.MP_CONTEXT: expected one of 'auto', 'fork', 'spawn', 'forkserver', got {self.mp_context!r}"
            )
        if not isinstance(self.timeout, (int, float)) or self.timeout < 0:
            raise ValueError(f"DATALOADER.TIMEOUT: expected seconds >= 0, got {self.timeout!r}")
        self.pin_memory = _tri_state(self.pin_memory, "DATALOADER.PIN_MEMORY")
        self.persistent_workers = _tri_state(self.persistent_workers, "DATALOADER.PERSISTENT_WORKERS")
        self.background = _tri_state(self.background, "DATALOADER.BACKGROUND_GENERATOR")
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
    """The settings used (what DataLoaderX receives) and why they differ from the request."""

    num_workers: int
    num_threads: int
    mp_context: str | None
    pin_memory: bool
    persistent_workers: bool
    prefetch_factor: int | None
    background: bool
    timeout: float
    device: str
    request: LoaderRequest
    reasons: list[str] = dataclasses.field(default_factory=list)
    warnings: list[str] = dataclasses.field(default_factory=list)

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

    def table(self) -> str:
        from tabulate import tabulate

        r = self.request
        rows = [
            ["worker processes", r.num_workers, self.num_workers],
            ["thread workers", r.num_threads, self.num_threads],
            ["start method", r.mp_context, self.mp_context or "-"],
            ["persistent workers", r.persistent_workers, self.persistent_workers],
            ["prefetch factor", r.prefetch_factor, self.prefetch_factor if self.prefetch_factor is not None else "-"],
            ["pin memory", r.pin_memory, self.pin_memory],
            ["background generator", r.background, self.background],
            ["timeout (s)", r.timeout, self.timeout if (self.num_workers or self.num_threads) else "-"],
        ]
        text = f"Data loader settings (device {self.device}):\n" + tabulate(
            rows, headers=["setting", "requested", "used"], tablefmt="simple"
        )
        notes = [f"  ! {w}" for w in self.warnings] + [f"  - {r}" for r in self.reasons]
        return text + ("\n" + "\n".join(notes) if notes else "")


def uses_cuda(device: str | torch.device | None) -> bool:
    """True when batches go to a CUDA device that is available."""
    if device is None:
        return False
    return torch.device(device).type == "cuda" and cuda_available()


def resolve_background(
    background: bool | str, num_workers: int, num_threads: int, device: str | torch.device | None
) -> bool:
    """"auto": a background thread only where it overlaps loading with GPU work at no risk: zero
    worker processes and zero thread workers (those already load ahead) feeding a CUDA model."""
    value = _tri_state(background, "DATALOADER.BACKGROUND_GENERATOR")
    if value == "auto":
        return num_workers == 0 and num_threads == 0 and uses_cuda(device)
    return bool(value)


# --------------------------------------------------------------------------------------------
# Worker-state probe: non-CPU tensors and modules, pickling
# --------------------------------------------------------------------------------------------
_ATOMS = (str, bytes, bytearray, int, float, complex, bool, type(None), range, type, types.ModuleType)
_MAX_ITEMS_PER_CONTAINER = 2000
_MAX_DEPTH = 6


def _children(obj: Any, path: str) -> Iterator[tuple[str, Any]]:
    """The attributes / elements of ``obj`` that get pickled with it, named by path."""
    if isinstance(obj, dict):
        for i, (key, value) in enumerate(obj.items()):
            if i >= _MAX_ITEMS_PER_CONTAINER:
                return
            yield f"{path}[{key!r}]", value
        return
    if isinstance(obj, (list, tuple, set, frozenset)):
        for i, value in enumerate(obj):
            if i >= _MAX_ITEMS_PER_CONTAINER:
                return
            yield f"{path}[{i}]", value
        return
    if isinstance(obj, functools.partial):
        yield f"{path}.func", obj.func
        for i, value in enumerate(obj.args):
            yield f"{path}.args[{i}]", value
        for key, value in obj.keywords.items():
            yield f"{path}.keywords[{key!r}]", value
        return
    if isinstance(obj, types.MethodType):
        yield f"{path}.__self__", obj.__self__
        return
    if isinstance(obj, types.FunctionType):
        for name, cell in zip(obj.__code__.co_freevars, obj.__closure__ or ()):
            with _suppress_empty_cell():
                yield f"{path}.<closure {name}>", cell.cell_contents
        return
    state = getattr(obj, "__dict__", None)
    if isinstance(state, dict):
        yield from ((f"{path}.{key}", value) for key, value in state.items())
    for cls in type(obj).__mro__:
        for slot in getattr(cls, "__slots__", ()) or ():
            if isinstance(slot, str) and slot not in ("__dict__", "__weakref__") and hasattr(obj, slot):
                yield f"{path}.{slot}", getattr(obj, slot)


class _suppress_empty_cell:  # noqa: N801 (used like contextlib.suppress)
    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        return exc_type is ValueError  # an empty closure cell


def _module_device(module: torch.nn.Module) -> torch.device | None:
    for tensor in list(module.parameters()) + list(module.buffers()):
        if tensor.device.type != "cpu":
            return tensor.device
    return None


def find_non_cpu_state(obj: Any, name: str) -> list[str]:
    """Paths of tensors and modules on a non-CPU device inside ``obj`` (a CUDA model inside a
    dataset cannot be used by worker processes)."""
    found: list[str] = []
    seen: set[int] = set()
    budget = [100_000]

    def walk(value: Any, path: str, depth: int) -> None:
        if budget[0] <= 0 or isinstance(value, _ATOMS) or id(value) in seen:
            return
        budget[0] -= 1
        seen.add(id(value))
        if isinstance(value, torch.Tensor):
            if value.device.type != "cpu":
                found.append(f"{path}: tensor on {value.device}")
            return
        if isinstance(value, torch.nn.Module):
            device = _module_device(value)
            if device is not None:
                found.append(f"{path}: module on {device}")
            return
        if isinstance(value, np.ndarray) or depth >= _MAX_DEPTH:
            return
        for child_path, child in _children(value, path):
            walk(child, child_path, depth + 1)

    walk(obj, name, 0)
    return found


class _NullSink(io.RawIOBase):
    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        return len(b)


class _InteractiveMainError(pickle.PicklingError):
    pass


class _ProbePopen:
    """Stands in for the Popen of a process being spawned while probing (multiprocessing locks and
    queues may be pickled only then)."""

    @staticmethod
    def duplicate_for_child(handle: Any) -> Any:
        return handle


class _ProbePickler(multiprocessing.reduction.ForkingPickler):
    """Pickles what a spawn worker receives, without the cost of copying tensor data and without
    moving tensors to shared memory (torch's reducers do that)."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, torch.Tensor):
            return torch.empty, (0,)
        if isinstance(obj, np.ndarray) and obj.dtype != object:
            return np.empty, (0,)
        if (
            isinstance(obj, (type, types.FunctionType))
            and getattr(obj, "__module__", None) == "__main__"
            and not getattr(sys.modules.get("__main__"), "__file__", None)
        ):
            raise _InteractiveMainError(
                    f"{obj.__qualname__} is defined in an interactive session (notebook / REPL); spawned "
                    "workers cannot import it (define it in a .py module)"
                )
        return NotImplemented


def _pickle_error(obj: Any) -> Exception | None:
    previous = multiprocessing.context.get_spawning_popen()
    multiprocessing.context.set_spawning_popen(_ProbePopen())
    try:
        _ProbePickler(_NullSink(), pickle.HIGHEST_PROTOCOL).dump(obj)
    except Exception as exc:
        return exc
    finally:
        multiprocessing.context.set_spawning_popen(previous)
    return None


def find_unpicklable(obj: Any, name: str, _depth: int = 0) -> str | None:
    """``"dataset.lock: cannot be pickled (TypeError: ...)"`` for the deepest attribute of ``obj``
    that a spawn worker cannot receive, or None when ``obj`` pickles."""
    error = _pickle_error(obj)
    if error is None:
        return None
    if _depth < _MAX_DEPTH and not isinstance(obj, _ATOMS):
        for child_path, child in _children(obj, name):
            deeper = find_unpicklable(child, child_path, _depth + 1)
            if deeper is not None:
                return deeper
    return f"{name}: cannot be pickled ({type(error).__name__}: {error})"


def find_worker_state_problems(
    dataset: Any,
    collate_fn: Callable | None = None,
    worker_init_fn: Callable | None = None,
    *,
    check_pickle: bool,
) -> list[str]:
    """Why worker processes cannot load from ``dataset`` (an empty list when they can)."""
    problems: list[str] = []
    parts = [("dataset", dataset), ("collate_fn", collate_fn), ("worker_init_fn", worker_init_fn)]
    for name, obj in parts:
        if obj is not None:
            problems.extend(find_non_cpu_state(obj, name))
    if check_pickle and not problems:
        for name, obj in parts:
            if obj is not None:
                problem = find_unpicklable(obj, name)
                if problem is not None:
                    problems.append(problem)
    return problems


# --------------------------------------------------------------------------------------------
# The `if __name__ == "__main__":` guard
# --------------------------------------------------------------------------------------------
def _is_main_guard(test: ast.expr) -> bool:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    consts = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return len(names) == 1 and len(consts) == 1


@functools.lru_cache(maxsize=32)
def _guarded_ranges(path: str, mtime: float) -> tuple[tuple[int, int], ...] | None:
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=path)
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    ranges: list[tuple[int, int]] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If) and _is_main_guard(node.test) and node.body:
                ranges.append((node.body[0].lineno, node.body[-1].end_lineno or node.body[-1].lineno))
            elif isinstance(node, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
                for block in ("body", "orelse", "finalbody"):
                    visit(getattr(node, block, []) or [])
                for handler in getattr(node, "handlers", []) or []:
                    visit(handler.body)

    visit(tree.body)
    return tuple(ranges)


def find_unguarded_main_call() -> tuple[str, int] | None:
    """(script, line) when the caller runs in the top-level code of the ``__main__`` script outside
    ``if __name__ == "__main__":``. Spawned workers re-import that script, re-run that line, and
    Python stops them with the "bootstrapping phase" RuntimeError."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if main is None or not path or not os.path.isfile(path):
        return None  # interactive sessions and `python -c` are not re-run by spawned workers
    main_globals = vars(main)
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals is main_globals:
            break
        frame = frame.f_back
    if frame is None:
        return None
    try:
        ranges = _guarded_ranges(os.path.abspath(path), os.path.getmtime(path))
    except OSError:
        return None
    if ranges is None:
        return None
    line = frame.f_lineno
    if any(start <= line <= end for start, end in ranges):
        return None
    return os.path.abspath(path), line


def unguarded_main_message(where: tuple[str, int], method: str, fallback: str | None) -> str:
    path, line = where
    text = (
        f"{path}, line {line}: {method} worker processes would be started from the top-level code of the "
        f"script, which has no `if __name__ == \"__main__\":` guard around it. Each {method} worker re-runs "
        "the script and Python stops it with \"An attempt has been made to start a new process before the "
        "current process has finished its bootstrapping phase\". Fix: move the code from line "
        f"{line} into a function, e.g. `def main(): ...`, and call it at the end of the file under the "
        "guard: `if __name__ == \"__main__\": main()`."
    )
    return text + (f" Using {fallback} for now." if fallback else "")


def _inside_spawn_bootstrap() -> bool:
    return bool(getattr(multiprocessing.current_process(), "_inheriting", False))


# --------------------------------------------------------------------------------------------
# The decision
# --------------------------------------------------------------------------------------------
def _thread_fallback(request: LoaderRequest, workers: int) -> tuple[int, str]:
    threads = request.num_threads or workers
    return threads, (f"{threads} thread workers" if threads else "the main process")


def decide_loader_settings(
    request: LoaderRequest,
    dataset: Any,
    *,
    collate_fn: Callable | None = None,
    worker_init_fn: Callable | None = None,
    device: str | torch.device | None = None,
    is_train: bool = True,
    check_main_guard: bool = True,
) -> LoaderDecision:
    """Apply the policy (see the module docstring) to ``request``."""
    reasons: list[str] = []
    warnings_: list[str] = []
    device_obj = torch.device(device) if device is not None else torch.device("cpu")
    on_cuda = uses_cuda(device_obj)
    if device_obj.type == "cuda" and not on_cuda:
        warnings_.append(f"device {device_obj} requested but CUDA is not available: no pinned memory, no stream prefetch")

    workers, threads = request.num_workers, request.num_threads
    context: str | None = None

    if workers > 0 and is_windows() and request.windows_safe:
        threads = request.num_threads
        reasons.append(
            f"Windows with DATALOADER.WINDOWS_SAFE True: no worker processes (requested {workers}), which avoids "
            "error 1455, pickling errors and re-spawn costs; "
            + (
                f"using {threads} thread workers (DATALOADER.NUM_THREADS)"
                if threads
                else "loading in the main process (set DATALOADER.NUM_THREADS > 0 for thread workers, or "
                "WINDOWS_SAFE False for spawn workers)"
            )
        )
        workers = 0
    if workers > 0 and multiprocessing.current_process().daemon:
        threads, instead = _thread_fallback(request, workers)
        warnings_.append(f"this process is a daemon process, which cannot start worker processes; using {instead}")
        workers = 0

    if workers > 0:
        if request.mp_context == "auto":
            context, why = preferred_start_method()
            reasons.append(f"start method {context}: {why}")
        else:
            context = request.mp_context
            if context not in available_start_methods():
                fallback, why = preferred_start_method()
                warnings_.append(
                    f"DATALOADER.MP_CONTEXT {context!r} is not available here; using {fallback} ({why})"
                )
                context = fallback
            elif context == "fork" and is_rocm():
                warnings_.append("DATALOADER.MP_CONTEXT 'fork' on ROCm: forked workers may fail after HIP starts; "
                                 "'auto' picks spawn")
        if request.num_threads:
            reasons.append("DATALOADER.NUM_THREADS not used: worker processes load the data")
        threads = 0

        problems = find_worker_state_problems(
            dataset, collate_fn, worker_init_fn, check_pickle=context in ("spawn", "forkserver")
        )
        if problems:
            threads, instead = _thread_fallback(request, workers)
            warnings_.append(
                f"worker processes ({context}) cannot load from this dataset: " + "; ".join(problems[:3])
                + f". Using {instead} instead. "
                + (
                    "To use worker processes, make these attributes picklable or create them lazily in the worker"
                    if all("cannot be pickled" in p or "interactive" in p for p in problems)
                    else "To use worker processes, keep models and GPU tensors out of the dataset (or on the CPU)"
                )
            )
            workers, context = 0, None
        elif context in ("spawn", "forkserver") and check_main_guard:
            if _inside_spawn_bootstrap():
                where = find_unguarded_main_call()
                raise RuntimeError(
                    unguarded_main_message(where, context, None)
                    if where
                    else "a spawned worker process is re-running the main script; protect it with "
                    "`if __name__ == \"__main__\":`"
                )
            where = find_unguarded_main_call()
            if where is not None:
                threads, instead = _thread_fallback(request, workers)
                warnings_.append(unguarded_main_message(where, context, instead))
                workers, context = 0, None

    if workers > 0 and is_linux():
        shm = shared_memory_bytes()
        if shm is not None and shm < _SMALL_SHM_BYTES:
            warnings_.append(
                f"/dev/shm is only {shm / 2**20:.0f} MiB: worker processes may die with a bus error; give docker "
                "--shm-size=2g or use DATALOADER.NUM_THREADS"
            )

    # settings that exist only with worker processes
    if workers > 0:
        if request.persistent_workers == "auto":
            persistent = is_train and context != "fork"
            if persistent:
                reasons.append(f"persistent workers: {context} workers are slow to start, kept between epochs")
        else:
            persistent = bool(request.persistent_workers)
        prefetch: int | None = request.prefetch_factor
    else:
        persistent, prefetch = False, None
        if request.persistent_workers is True and request.num_workers > 0:
            reasons.append("persistent workers off: no worker processes")

    if request.pin_memory == "auto":
        pin = on_cuda
    else:
        pin = bool(request.pin_memory) and on_cuda
        if request.pin_memory and not on_cuda:
            reasons.append("pin memory off: batches do not go to a CUDA device")

    background = resolve_background(request.background, workers, threads, device_obj)
    if request.background == "auto" and background:
        reasons.append("background generator on: zero worker processes feeding a CUDA model")
    if threads > cpu_count() * 4:
        reasons.append(f"{threads} thread workers on {cpu_count()} CPUs: more threads rarely help")

    return LoaderDecision(
        num_workers=workers,
        num_threads=threads,
        mp_context=context,
        pin_memory=pin,
        persistent_workers=persistent,
        prefetch_factor=prefetch,
        background=background,
        timeout=float(request.timeout),
        device=str(device_obj),
        request=request,
        reasons=reasons,
        warnings=warnings_,
    )


_logged: set[tuple] = set()


def log_decision(decision: LoaderDecision, log: logging.Logger | None = None) -> None:
    """Log the decision table once per distinct decision (warnings at WARNING level)."""
    key = (
        decision.num_workers,
        decision.num_threads,
        decision.mp_context,
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


# --------------------------------------------------------------------------------------------
# Public helpers
# --------------------------------------------------------------------------------------------
def build_dataloader(
    dataset: Any,
    *,
    batch_sampler: Any,
    collate_fn: Callable | None,
    cfg: Any,
    device: str | torch.device | None,
    seed: int | None,
    start_batch: int = 0,
    is_train: bool = True,
    worker_init_fn: Callable[[int], None] | None = None,
):
    """Apply the policy to ``cfg.DATALOADER.*`` and return a ``DataLoaderX`` over ``batch_sampler``."""
    from fastreid.utils import comm

    return _loader_from_request(
        LoaderRequest.from_cfg(cfg), dataset, batch_sampler, collate_fn, worker_init_fn, device, seed, is_train,
        rank=comm.get_rank(), start_batch=start_batch,
    )


def _loader_from_request(
    request: LoaderRequest,
    dataset: Any,
    batch_sampler: Any,
    collate_fn: Callable | None,
    worker_init_fn: Callable[[int], None] | None,
    device: str | torch.device | None,
    seed: int | None,
    is_train: bool,
    rank: int = 0,
    start_batch: int = 0,
):
    """Decide (and log once), then build the ``DataLoaderX`` with the decided settings."""
    from fastreid.data.data_utils import DataLoaderX

    decision = decide_loader_settings(
        request, dataset, collate_fn=collate_fn, worker_init_fn=worker_init_fn, device=device, is_train=is_train
    )
    log_decision(decision)
    loader = DataLoaderX(
        dataset,
        batch_sampler=batch_sampler,
        collate_fn=collate_fn,
        worker_init_fn=worker_init_fn,
        device=device,
        seed=seed,
        rank=rank,
        start_batch=start_batch,
        **decision.dataloader_kwargs(),
    )
    loader.decision = decision
    return loader


def create_dataloader(
    dataset: Any,
    batch_size: int,
    shuffle: bool,
    num_workers: int | None = None,
    seed: int = 0,
    force_zero_workers_on_windows: bool = True,
    *,
    num_threads: int = 0,
    mp_context: str = "auto",
    pin_memory: bool | str = "auto",
    persistent_workers: bool | str = "auto",
    prefetch_factor: int = 2,
    background: bool | str = "auto",
    timeout: float = 300,
    device: str | torch.device | None = None,
    collate_fn: Callable | None = None,
    drop_last: bool = False,
    worker_init_fn: Callable[[int], None] | None = None,
    is_train: bool | None = None,
):
    """A ``DataLoaderX`` from plain arguments, with the platform policy applied (for user scripts).

    ``num_workers=None`` uses :func:`get_recommended_num_workers`. ``force_zero_workers_on_windows``
    is ``DATALOADER.WINDOWS_SAFE``. Shuffling is seeded by ``seed``.
    """

    if num_workers is None:
        num_workers = get_recommended_num_workers()
    request = LoaderRequest(
        num_workers=num_workers,
        num_threads=num_threads,
        mp_context=mp_context,
        windows_safe=force_zero_workers_on_windows,
        pin_memory=pin_memory,
        persistent_workers=persistent_workers,
        prefetch_factor=prefetch_factor,
        background=background,
        timeout=timeout,
    )
    generator = torch.Generator().manual_seed(int(seed))
    sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
    return _loader_from_request(
        request, dataset, BatchSampler(sampler, batch_size, drop_last), collate_fn, worker_init_fn, device, seed,
        is_train=shuffle if is_train is None else is_train,
    )


def print_dataloader_config(loader_or_decision: Any, file: Any = None) -> str:
    """Print (and return) the settings of a loader built by this module, or of a decision."""
    decision = getattr(loader_or_decision, "decision", loader_or_decision)
    if isinstance(decision, LoaderDecision):
        text = decision.table()
    else:
        loader = loader_or_decision
        from tabulate import tabulate

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
        text = "Data loader settings:\n" + tabulate(rows, headers=["setting", "value"], tablefmt="simple")
    print(text, file=file if file is not None else sys.stdout)
    return text
