"""The one decider of the device a job runs on (``MODEL.DEVICE``).

- ``cpu``; ``cuda`` / ``cuda:N``; ``mps``; ``xpu`` / ``xpu:N``; ``auto`` = CUDA, else MPS, else
  the CPU.
- A GPU type that this machine does not have falls back to the CPU with one warning (the same
  for CUDA, MPS and XPU); a CUDA/XPU index beyond the devices present is an error.
- Anything else is a :class:`~fastreid.utils.errors.DeviceError` naming the valid values.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import torch

from fastreid.utils.errors import DeviceError
from fastreid.utils.platform import cuda_available

__all__ = [
    "VALID_DEVICES",
    "DeviceOutOfMemoryError",
    "check_device_string",
    "describe_batch",
    "device_type_of",
    "out_of_memory_error",
    "resolve_device",
]

VALID_DEVICES = "cpu, cuda, cuda:N, mps, xpu, xpu:N or auto"

_DEVICE_RE = re.compile(r"^(cpu|auto|mps|(cuda|xpu)(:\d+)?)$")


def check_device_string(name: str) -> str:
    """``name`` normalised (stripped, lower case); :class:`DeviceError` when it is not one of
    :data:`VALID_DEVICES`."""
    text = str(name).strip().lower()
    if not _DEVICE_RE.match(text):
        raise DeviceError(f"MODEL.DEVICE {name!r} is not a device; use {VALID_DEVICES}")
    return text


def _available(kind: str) -> bool:
    if kind == "cuda":
        return cuda_available()
    if kind == "mps":
        backend = getattr(torch.backends, "mps", None)
        return bool(backend is not None and backend.is_available())
    if kind == "xpu":
        xpu = getattr(torch, "xpu", None)
        return bool(xpu is not None and xpu.is_available())
    return kind == "cpu"


def _device_count(kind: str) -> int:
    module = getattr(torch, kind, None)
    return int(module.device_count()) if module is not None and hasattr(module, "device_count") else 1


def _resolve(name: str, warn: bool = True) -> str:
    text = check_device_string(name)
    if text == "auto":
        for kind in ("cuda", "mps"):
            if _available(kind):
                return kind
        return "cpu"
    kind, _, index = text.partition(":")
    if kind == "cpu":
        return "cpu"
    if not _available(kind):
        if warn:
            logging.getLogger("fastreid").warning(
                f"MODEL.DEVICE is {name!r} but {kind.upper()} is not available; running on the CPU"
            )
        return "cpu"
    if index and int(index) >= _device_count(kind):
        raise DeviceError(
            f"MODEL.DEVICE {name!r}: this machine has only {_device_count(kind)} {kind.upper()} device(s)"
        )
    return text


def device_type_of(name: str) -> str:
    """The kind of device ("cpu", "cuda", "mps", "xpu") a job asking for ``name`` runs on, with the
    same fallback as :func:`resolve_device` but nothing logged (for checks made before the job)."""
    return _resolve(str(name), warn=False).split(":")[0]


def resolve_device(requested: Any) -> str:
    """The device to run on, as a string torch accepts.

    ``requested`` is a device string, or a config: then ``MODEL.DEVICE`` is resolved and written
    back (frozen configs stay frozen), so later calls and the saved config see the real device
    and the fallback is logged once.
    """
    model = getattr(requested, "MODEL", None)
    if model is None:
        return _resolve(str(requested))
    device = _resolve(str(model.DEVICE))
    if device != model.DEVICE:
        frozen = requested.is_frozen()
        requested.defrost()
        requested.MODEL.DEVICE = device
        if frozen:
            requested.freeze()
    return device


class DeviceOutOfMemoryError(DeviceError, RuntimeError):
    """The accelerator ran out of memory for a batch; the message names the setting to lower."""


_ASKED_RE = re.compile(r"Tried to allocate ([\d.]+ [KMGT]i?B)")


def out_of_memory_error(
    exc: BaseException, *, doing: str, batch: str, settings: str, after: str = ""
) -> DeviceOutOfMemoryError:
    """The one-line error for ``torch.OutOfMemoryError`` ``exc`` raised while ``doing`` (e.g.
    "training iteration 67") on ``batch`` (e.g. "32 images of 3x256x128"): the memory PyTorch asked
    for, what the device has, which ``settings`` to lower, then ``after`` (what was kept, say).
    PyTorch's own message, a wall of allocator advice, stays in the traceback the log keeps."""
    text = str(exc)
    asked = _ASKED_RE.search(text)
    where = ""
    if torch.cuda.is_available():
        index = torch.cuda.current_device()
        free, total = torch.cuda.mem_get_info(index)
        where = f" (cuda:{index} has {total / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free now)"
    needed = f"PyTorch asked for {asked.group(1)} more" if asked else "PyTorch asked for more"
    return DeviceOutOfMemoryError(
        f"Out of device memory in {doing} with a batch of {batch}: {needed}{where}. "
        f"Lower {settings}, or enable SOLVER.AMP.ENABLED{after}"
    )


def describe_batch(batch: Any) -> str:
    """What a batch dict (or a tensor of images) holds, e.g. ``32 images of 3x256x128``; "?" when it
    holds no images."""
    images = batch.get("images") if isinstance(batch, dict) else batch
    if isinstance(images, torch.Tensor) and images.dim() == 4:
        return f"{images.shape[0]} images of {'x'.join(str(n) for n in images.shape[1:])}"
    return "?"
