"""Folders written by fastreid's data generators: a marker file, and nothing foreign ever deleted.

A generator writes its whole tree into a hidden sibling folder first and moves it into place at
the end, with a marker file (:data:`MARKER_NAME`) listing every file it wrote. When the target
folder already exists:

- it is missing or empty: the new tree is moved in;
- it carries a fastreid marker and holds only the files listed there (plus decoded-cache files
  under ``.cache/``, which are derived from them): the listed files are removed one by one, empty
  folders removed, the new tree moved in;
- anything else (a real data set, a marked tree the user added files to): a
  :class:`GeneratedTreeError` naming the folder, unless ``overwrite`` is given, in which case the
  old folder is **renamed** aside to ``<folder>.old-<time>``; nothing is deleted.

A generator that fails half way leaves the target untouched and removes only its own hidden
temporary folder.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, Optional

from fastreid.utils.errors import UserError

from ..cache import is_cache_file

__all__ = ["MARKER_NAME", "GeneratedTreeError", "TreeWrite", "generated_tree", "read_marker", "owned_files"]

logger = logging.getLogger(__name__)

MARKER_NAME = ".fastreid-generated.json"
MARKER_TAG = "fastreid generated tree"


class GeneratedTreeError(UserError, FileExistsError):
    """The output folder of a generator holds data the generator did not write."""


def read_marker(folder: str) -> Optional[dict]:
    """The marker of ``folder`` when it is a readable fastreid marker, else None."""
    try:
        with open(os.path.join(folder, MARKER_NAME), encoding="utf-8") as f:
            marker = json.load(f)
    except (OSError, ValueError):
        return None
    if (
        not isinstance(marker, dict)
        or marker.get("tag") != MARKER_TAG
        or not isinstance(marker.get("files"), list)
    ):
        return None
    return marker


def _all_files(folder: str) -> list[str]:
    out = []
    for dirpath, _, files in os.walk(folder):
        for name in files:
            out.append(os.path.relpath(os.path.join(dirpath, name), folder).replace(os.sep, "/"))
    return sorted(out)


def owned_files(folder: str) -> tuple[list[str], list[str]]:
    """``(ours, foreign)``: relative paths in ``folder`` written by a generator (listed in its
    marker, the marker itself, decoded-cache files) and every other file."""
    marker = read_marker(folder)
    listed = set(marker["files"]) if marker else set()
    ours, foreign = [], []
    for rel in _all_files(folder):
        if marker and (rel in listed or rel == MARKER_NAME or is_cache_file(os.path.join(folder, rel))):
            ours.append(rel)
        else:
            foreign.append(rel)
    return ours, foreign


def _aside_name(folder: str) -> str:
    base = f"{folder}.old-{time.strftime('%Y%m%d-%H%M%S')}"
    candidate, n = base, 1
    while os.path.lexists(candidate):
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def _examples(paths: list[str], limit: int = 3) -> str:
    shown = ", ".join(paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


def _check_target(out: str, overwrite: bool, replace_own: bool, what: str) -> Optional[str]:
    """Raise when ``out`` may not be replaced; returns why it will be moved aside, or None."""
    if not os.path.lexists(out):
        return None
    if not os.path.isdir(out) or os.path.islink(out):
        if overwrite:
            return "not a folder"
        raise GeneratedTreeError(
            f"{out} exists and is not a folder; nothing was changed. "
            f"Choose another --root, or pass --overwrite to move it aside."
        )
    try:
        ours, foreign = owned_files(out)
    except OSError as e:
        raise GeneratedTreeError(f"cannot read {out} ({e.strerror}); nothing was changed.") from None
    if not ours and not foreign:
        return None
    marker = read_marker(out)
    if marker is not None and not foreign:
        if replace_own:
            return None
        raise GeneratedTreeError(
            f"{out} exists (a {what} written earlier); not replacing it as asked. "
            "Drop --no-overwrite to regenerate it."
        )
    if overwrite:
        return "foreign files"
    if marker is None:
        raise GeneratedTreeError(
            f"{out} exists and was not written by the {what} generator (it has no {MARKER_NAME}); "
            f"nothing was changed. Write the {what} elsewhere (--root), or pass --overwrite to move "
            f"this folder aside to {out}.old-<time> (nothing is deleted)."
        )
    raise GeneratedTreeError(
        f"{out} was written by the {what} generator but now also holds files it did not write "
        f"({_examples(foreign)}); nothing was changed. Move those files out, or pass --overwrite to "
        f"move the whole folder aside to {out}.old-<time> (nothing is deleted)."
    )


def _remove_own_tree(out: str) -> None:
    ours, foreign = owned_files(out)
    if foreign:  # appeared since the check
        raise GeneratedTreeError(
            f"{out} now holds files the generator did not write ({_examples(foreign)}); "
            "nothing more was changed."
        )
    for rel in ours:
        with suppress(FileNotFoundError):
            os.remove(os.path.join(out, rel))
    for dirpath, _, _ in sorted(os.walk(out, topdown=False), key=lambda t: -len(t[0])):
        with suppress(OSError):
            os.rmdir(dirpath)  # only empty folders: never removes a file
    if os.path.exists(out):
        raise GeneratedTreeError(
            f"{out} could not be emptied of the generator's own files; nothing more was changed."
        )


def _partial_prefix(out: str, pid: int) -> str:
    return f".{os.path.basename(out)}.partial-{pid}-"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists but belongs to someone else (or the platform cannot tell): keep it
        return True
    return True


def _remove_dead_partials(out: str) -> None:
    """Remove temporary trees that a generator killed mid-way (``kill -9``) left next to ``out``.

    Only folders named by :func:`_partial_prefix` whose writer process is gone are removed: they
    are this module's own temporaries, never a user's data.
    """
    parent = os.path.dirname(out) or "."
    pattern = re.compile(re.escape(f".{os.path.basename(out)}.partial-") + r"(\d+)-[^/\\]+$")
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        m = pattern.match(name)
        path = os.path.join(parent, name)
        if m and os.path.isdir(path) and not _pid_alive(int(m.group(1))):
            shutil.rmtree(path, ignore_errors=True)
            logger.info(f"Removed {path}, left by a generator that was killed mid-way.")


@dataclass
class TreeWrite:
    """What :func:`generated_tree` yields: ``path`` to write into; after the block,
    ``moved_aside`` holds where a replaced foreign folder went (None when nothing was moved)."""

    path: str
    moved_aside: Optional[str] = None


@contextmanager
def generated_tree(
    out: str,
    *,
    generator: str,
    what: str,
    info: Optional[dict[str, Any]] = None,
    overwrite: bool = False,
    replace_own: bool = True,
) -> Iterator[TreeWrite]:
    """Context manager yielding a :class:`TreeWrite` whose fresh temporary ``path`` the tree goes into.

    On success the tree gets its marker and replaces ``out`` under the rules of this module; on
    error the temporary folder is removed and ``out`` is untouched. ``overwrite`` moves a foreign
    ``out`` aside (never deletes it); ``replace_own=False`` refuses even a tree of our own.
    """
    out = os.path.normpath(out)
    _check_target(out, overwrite, replace_own, what)  # refuse before spending time generating
    parent = os.path.dirname(out) or "."
    os.makedirs(parent, exist_ok=True)
    _remove_dead_partials(out)
    write = TreeWrite(tempfile.mkdtemp(prefix=_partial_prefix(out, os.getpid()), dir=parent))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(write.path, 0o777 & ~umask)  # mkdtemp's 0700 would make the data set private
    try:
        yield write
        marker = {
            "tag": MARKER_TAG,
            "generator": generator,
            "what": what,
            "info": info or {},
            "files": _all_files(write.path),
        }  # no time stamp: same arguments, same bytes
        with open(os.path.join(write.path, MARKER_NAME), "w", encoding="utf-8") as f:
            json.dump(marker, f, indent=1)
        reason = _check_target(out, overwrite, replace_own, what)
        if reason is not None:
            write.moved_aside = _aside_name(out)
            os.rename(out, write.moved_aside)
            logger.warning(
                f"Moved the existing {out} aside to {write.moved_aside} ({reason}); nothing was deleted."
            )
        elif os.path.isdir(out):
            _remove_own_tree(out)
        os.replace(write.path, out)
    except BaseException:
        shutil.rmtree(write.path, ignore_errors=True)  # the temporary folder this function made
        raise
