"""Shared helpers of the data set parsers: listing image files, reading list files, and turning
names or lines into ``(img_path, pid, camid)`` items with one policy for bad entries.

The policy: an entry (file name or list line) that does not parse is skipped and counted, and one
warning names the first few; only when nothing valid remains is it an error
(:class:`DatasetFormatError`), as is a folder with no images at all. A folder that cannot be read
is a :class:`DatasetNotFoundError` naming it. Every message is one that a user can act on.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from typing import Callable, Optional

from .bases import DatasetFormatError, DatasetNotFoundError

__all__ = [
    "IMAGE_EXTENSIONS",
    "MalformedEntryError",
    "list_images",
    "list_subfolders",
    "read_lines",
    "parse_entries",
]

logger = logging.getLogger(__name__)

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp")

#: An entry to parse: (what to call it in messages, the value the parse function receives).
Entry = tuple[str, str]


class MalformedEntryError(ValueError):
    """Raised by a parse function for an entry that does not follow the data set's convention."""


def _listdir(folder: str) -> list[str]:
    try:
        return sorted(os.listdir(folder))
    except FileNotFoundError:
        raise DatasetNotFoundError(f"not found: {folder}") from None
    except OSError as e:
        raise DatasetNotFoundError(f"cannot read the folder {folder} ({e.strerror})") from None


def list_images(
    folder: str, extensions: Sequence[str] = IMAGE_EXTENSIONS, recursive: bool = False
) -> list[str]:
    """Image files of ``folder`` (and its sub-folders when ``recursive``), sorted by path: a fixed
    order on every OS and file system (upstream's ``glob`` order is not)."""
    exts = tuple(e.lower() for e in extensions)
    if not recursive:
        return [
            os.path.join(folder, n)
            for n in _listdir(folder)
            if n.lower().endswith(exts) and os.path.isfile(os.path.join(folder, n))
        ]
    _listdir(folder)  # a clear error for a missing or unreadable top folder
    out = []
    for dirpath, dirnames, files in os.walk(folder):
        dirnames.sort()
        out += [os.path.join(dirpath, n) for n in sorted(files) if n.lower().endswith(exts)]
    return sorted(out)


def list_subfolders(folder: str) -> list[str]:
    """Names of the sub-folders of ``folder`` (hidden ones such as ``.cache`` left out), sorted."""
    return [n for n in _listdir(folder) if not n.startswith(".") and os.path.isdir(os.path.join(folder, n))]


def read_lines(path: str) -> list[Entry]:
    """Non-empty lines of a list file as entries ``("<file>:<line> '<text>'", text)``."""
    try:
        with open(path, encoding="utf-8") as f:
            return [
                (f"{path}:{n} {line.strip()!r}", line.strip()) for n, line in enumerate(f, 1) if line.strip()
            ]
    except FileNotFoundError:
        raise DatasetNotFoundError(f"not found: {path}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise DatasetFormatError(f"cannot read the list file {path} ({e})") from None


def parse_entries(
    owner: str,
    where: str,
    entries: Iterable[Entry],
    parse: Callable[[str], Optional[tuple]],
    expected: str,
    allow_empty: bool = False,
) -> list[tuple]:
    """Items from ``entries`` by ``parse`` (returns an item, or None for an entry that is
    deliberately left out such as junk; raises :class:`MalformedEntryError`, ``ValueError`` or
    ``IndexError`` for a bad one).

    ``owner`` (the data set) and ``where`` (folder or list file) name the source in messages,
    ``expected`` describes a good entry. Bad entries are skipped with one warning; no entries at
    all (unless ``allow_empty``) or no good one is a :class:`DatasetFormatError`.
    """
    items, bad = [], []
    total = 0
    for label, value in entries:
        total += 1
        try:
            item = parse(value)
        except (ValueError, IndexError, KeyError) as e:
            bad.append((label, str(e)))
            continue
        if item is not None:
            items.append(item)
    if total == 0:
        if allow_empty:
            return items
        raise DatasetFormatError(
            f"{owner}: no images in {where} (expected {expected}); is the data set extracted completely?"
        )
    if bad:
        first = "; ".join(f"{label}" + (f" ({why})" if why else "") for label, why in bad[:3])
        if not items and total == len(bad):
            raise DatasetFormatError(
                f"{owner}: none of the {total} entries of {where} is valid (expected "
                f"{expected}); first: {first}"
            )
        logger.warning(
            f"{owner}: skipped {len(bad)} of {total} entries of {where} that do not match "
            f"{expected}; first: {first}"
        )
    return items
