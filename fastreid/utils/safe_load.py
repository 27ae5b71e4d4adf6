"""The one function that reads ``.pth`` files: safe unpickling, checksums, one-line errors.

``torch.load(weights_only=True)`` only rebuilds tensors, containers and plain numbers, so a file
cannot run code while it is read. Everything fastreid writes (model, optimizer, schedulers, RNG
states, iteration, plateau state) and upstream FastReID's checkpoints (state dicts, optimizer and
scheduler states, ``epoch``, ``metric``) load that way; numpy scalars and arrays, which some older
files hold, are allow-listed. A file that needs full unpickling is refused unless the user opts in
with ``--trust-checkpoint`` / ``MODEL.TRUST_CHECKPOINT True``.

Every failure is a :class:`~fastreid.utils.errors.CheckpointError` whose message names the file.
"""

from __future__ import annotations

import logging
import os
import pickle
from typing import Any, Optional

import numpy as np
import torch

from fastreid.utils.checksum import verify_checksum
from fastreid.utils.errors import CheckpointError

__all__ = [
    "TRUST_HINT",
    "CheckpointNotFoundError",
    "checkpoint_trusted",
    "load_torch_file",
    "set_checkpoint_trust",
]

logger = logging.getLogger(__name__)

TRUST_HINT = "--trust-checkpoint (or MODEL.TRUST_CHECKPOINT True)"

_trust_by_default = False


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """A checkpoint or weights file that does not exist (also a ``FileNotFoundError``)."""


def set_checkpoint_trust(trusted: bool) -> None:
    """Process-wide default of ``trust`` for :func:`load_torch_file` (set from
    ``MODEL.TRUST_CHECKPOINT`` by the job setup)."""
    global _trust_by_default
    _trust_by_default = bool(trusted)


def checkpoint_trusted() -> bool:
    """Whether files that need full unpickling are loaded (the process-wide default)."""
    return _trust_by_default


def _numpy_safe_globals() -> list[Any]:
    """numpy scalar/array reconstruction under the names numpy 1.x and 2.x pickles use."""
    core = getattr(np, "_core", None) or np.core
    scalar = core.multiarray.scalar
    reconstruct = core.multiarray._reconstruct
    entries: list[Any] = [np.ndarray, np.dtype]
    for module in ("numpy.core.multiarray", "numpy._core.multiarray"):
        entries.append((scalar, f"{module}.scalar"))
        entries.append((reconstruct, f"{module}._reconstruct"))
    dtypes = getattr(np, "dtypes", None)
    if dtypes is not None:
        entries.extend(
            getattr(dtypes, name)
            for name in dir(dtypes)
            if name.endswith("DType") and name not in ("ObjectDType", "VoidDType", "StringDType")
        )
    return entries


def _refusal_reason(error: BaseException) -> Optional[str]:
    """The line of a weights-only refusal that says what was refused; None for other errors."""
    text = str(error)
    if not text.startswith("Weights only load failed"):
        return None
    for line in text.splitlines():
        line = line.strip()
        if "GLOBAL" in line or line.startswith("Unsupported"):
            return line.rstrip(".")
    return "it holds Python objects other than tensors and plain containers"


def _corrupt(path: str, description: str, error: BaseException) -> CheckpointError:
    reason = " ".join(str(error).split()) or type(error).__name__
    if len(reason) > 160:
        reason = reason[:157] + "..."
    return CheckpointError(
        f"{description} {path} is not a readable PyTorch checkpoint (truncated, corrupt or not a "
        f".pth file): {type(error).__name__}: {reason}"
    )


def load_torch_file(
    path: str,
    *,
    trust: Optional[bool] = None,
    description: str = "Checkpoint",
    hint: str = "",
    trust_hint: str = TRUST_HINT,
    mmap: bool = False,
) -> Any:
    """Read a ``torch.save`` file on the CPU, safely.

    ``trust`` (default: :func:`checkpoint_trusted`) allows full unpickling of files that need it,
    with a warning. ``description`` names the file's role in messages (e.g. "MODEL.WEIGHTS") and
    ``hint`` is appended to the "does not exist" message; ``trust_hint`` names the option that
    sets ``trust`` in the refusal. A ``<path>.sha256`` sidecar, when present, is
    verified first. ``mmap`` maps the file instead of reading it (to look at a few entries).
    """
    trust = checkpoint_trusted() if trust is None else trust
    if not os.path.exists(path):
        raise CheckpointNotFoundError(f"{description} {path} does not exist{'; ' + hint if hint else ''}")
    if not os.path.isfile(path):
        raise CheckpointError(f"{description} {path} is not a file")
    if os.path.getsize(path) == 0:
        raise CheckpointError(f"{description} {path} is empty (0 bytes); it was not written completely")
    try:
        verify_checksum(path)
    except OSError as e:
        raise CheckpointError(f"{description} {path} cannot be read: {e.strerror or e}") from e
    try:
        with torch.serialization.safe_globals(_numpy_safe_globals()):
            return torch.load(path, map_location="cpu", weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as e:
        reason = _refusal_reason(e)
        if reason is None:
            raise _corrupt(path, description, e) from e
        if not trust:
            raise CheckpointError(
                f"{description} {path} needs full unpickling, which can run arbitrary code ({reason}); "
                f"refusing to load it. If you trust where the file comes from, pass {trust_hint}"
            ) from None
    except OSError as e:
        raise CheckpointError(f"{description} {path} cannot be read: {e.strerror or e}") from e
    except Exception as e:  # zip reader, EOF, decoding errors: a damaged or foreign file
        raise _corrupt(path, description, e) from e

    option = "MODEL.TRUST_CHECKPOINT" if trust_hint == TRUST_HINT else trust_hint
    logger.warning(
        f"{description} {path} holds pickled Python objects; loading it fully because "
        f"{option} is set (this can run code from the file)"
    )
    try:
        return torch.load(path, map_location="cpu", weights_only=False, mmap=mmap)
    except Exception as e:
        raise _corrupt(path, description, e) from e
