"""Writing a file so that ``path`` never holds a partial one: a temporary file next to it, fsync,
rename. A full disk and a Ctrl-C in the middle of a write are reported as what they are."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable
from typing import BinaryIO, Optional

from fastreid.utils.errors import UserError

__all__ = ["DiskFullError", "atomic_write"]


class DiskFullError(UserError, OSError):
    """A checkpoint could not be written because the disk (or quota) is full."""

    label = "No space left on device"


def _causes(error: BaseException) -> list[BaseException]:
    chain, seen = [], set()
    current: Optional[BaseException] = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _translate_write_error(error: BaseException, path: str) -> Optional[BaseException]:
    """What a failed write really was. torch.save reports both a full disk and a Ctrl-C in the
    middle of writing as ``[enforce fail at inline_container.cc]``; the real cause is in the
    exception chain."""
    chain = _causes(error)
    if any(isinstance(e, KeyboardInterrupt) for e in chain):
        return KeyboardInterrupt()
    if any(isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT) for e in chain):
        folder = os.path.dirname(os.path.abspath(path))
        full = DiskFullError(
            f"{folder} (while writing {os.path.basename(path)}; the previous checkpoint is intact). "
            "Free some space, then continue with --resume"
        )
        full.errno = errno.ENOSPC
        return full
    return None


def atomic_write(path: str, write: Callable[[BinaryIO], object]) -> None:
    """Call ``write(file_object)`` on a temporary file next to ``path``, then rename it."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.tmp.{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        translated = _translate_write_error(e, path)
        if translated is not None:
            raise translated from e
        raise
