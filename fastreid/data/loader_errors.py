"""Errors of the data loaders, and how a sample is named in them (its index and file)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastreid.data.sample_seed import SampleKey, sample_index
from fastreid.utils.errors import UserError

__all__ = ["SampleLoadError", "describe_sample", "describe_samples"]

# Attributes under which datasets commonly keep their (path, pid, camid, ...) entries.
_ITEM_LISTS = ("img_items", "items", "samples", "imgs", "data")


class SampleLoadError(UserError, RuntimeError):
    """Loading a sample or a batch failed: a worker raised, died or timed out.

    ``indices`` are the dataset indices involved (the failing sample first when it is known),
    ``batch`` the position of the batch in its epoch (None when unknown).
    """

    def __init__(self, message: str, indices: Sequence[int] = (), batch: int | None = None):
        super().__init__(message)
        self.indices = list(indices)
        self.batch = batch


def describe_sample(dataset: Any, item: int | SampleKey) -> str:
    """``"index 12 ('/data/0002_c1s1_000451_03.jpg')"``, or ``"index 12"`` when no file is known.

    A dataset may define ``describe_sample(index) -> str``; otherwise the first element of its
    ``img_items`` (or ``items``, ``samples``, ...) entry is taken as the file name.
    """
    index = sample_index(item)
    text = f"index {index}"
    try:
        custom = getattr(dataset, "describe_sample", None)
        if callable(custom):
            return f"{text} ({custom(index)})"
        for name in _ITEM_LISTS:
            entries = getattr(dataset, name, None)
            if isinstance(entries, Sequence) and not isinstance(entries, (str, bytes)) and 0 <= index < len(entries):
                entry = entries[index]
                path = entry[0] if isinstance(entry, (tuple, list)) and entry else entry
                if isinstance(path, str):
                    return f"{text} ({path!r})"
    except Exception:  # naming a sample must never hide the error being reported
        pass
    return text


def describe_samples(dataset: Any, items: Sequence[int | SampleKey], limit: int = 6) -> str:
    shown = ", ".join(describe_sample(dataset, item) for item in list(items)[:limit])
    more = len(items) - limit
    return shown + (f", ... ({more} more)" if more > 0 else "")
