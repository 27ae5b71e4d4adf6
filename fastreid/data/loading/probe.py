"""The worker-state probe: can worker processes load from this dataset?

Worker processes cannot use a dataset (or collate / worker-init function) that holds tensors or
modules on a non-CPU device; spawn and forkserver workers also need everything to pickle, and
cannot import classes defined in an interactive ``__main__``. The probe names the attribute
(``dataset.sr_model: module on cuda:0``) so the warning can say what to change.
"""

from __future__ import annotations

import functools
import io
import multiprocessing
import multiprocessing.context
import multiprocessing.reduction
import pickle
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any, cast

import numpy as np
import torch

__all__ = ["find_non_cpu_state", "find_unpicklable", "find_worker_state_problems"]


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
    multiprocessing.context.set_spawning_popen(cast(Any, _ProbePopen()))  # duck-typed stand-in for a Popen
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
