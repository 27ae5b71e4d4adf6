"""Reading the identity-level attribute files of Market-1501 and DukeMTMC-reID (Lin et al.,
"Improving person re-identification by attribute and identity learning", 2019).

``market_attribute.mat`` / ``duke_attribute.mat`` hold one struct (``market_attribute`` /
``duke_attribute``) with ``train`` and ``test`` structs; each has ``image_index`` (the identities,
``'0002'`` ...) and one row per attribute, its values 1 (no) or 2 (yes) per identity (Market's
``age`` 1..4). Upstream reads them with mat4py; here scipy reads them into the same shape: a dict
attribute -> values, ``image_index`` a list of strings. As upstream, the attributes are the
``train`` struct's fields sorted by name, and an image's labels are its identity's values minus 1.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, Optional

import numpy as np

from fastreid.data.datasets.parsing import MalformedEntryError, list_images, parse_entries

from .bases import DatasetFormatError, load_mat

__all__ = ["read_attribute_mat", "attribute_items"]

PATTERN = re.compile(r"([-\d]+)_c(\d)")


def _values(value: Any) -> np.ndarray:
    return np.atleast_1d(np.asarray(value, dtype=object)).reshape(-1)


def _split(struct: Any, split: str, path: str, owner: str) -> dict[str, Any]:
    if not isinstance(struct, Mapping):
        raise DatasetFormatError(f"{owner}: {path}: '{split}' is not a struct of attributes")
    annotation: dict[str, Any] = {}
    for name, value in struct.items():
        values = _values(value)
        annotation[name] = [str(v) for v in values] if name == "image_index" else values
    if "image_index" not in annotation:
        raise DatasetFormatError(f"{owner}: {path}: the '{split}' struct has no image_index (the identities)")
    return annotation


def read_attribute_mat(path: str, key: str, owner: str, url: str) -> tuple[list[str], dict[str, dict]]:
    """``(sorted attribute names, {"train": annotation, "test": annotation})`` of ``path``.

    The two splits must name the same attributes, and each attribute one value per identity:
    otherwise a :class:`DatasetFormatError` names the file and what differs."""
    mat = load_mat(path, owner, simplify_cells=True)
    if key not in mat or not isinstance(mat[key], Mapping):
        raise DatasetFormatError(
            f"{owner}: {path} holds no '{key}' struct (found: {', '.join(k for k in mat if not k.startswith('__'))}); "
            f"use the attribute file published at {url}"
        )
    splits = {}
    for split in ("train", "test"):
        if split not in mat[key]:
            raise DatasetFormatError(
                f"{owner}: {path}: '{key}' has no '{split}' struct; use the file from {url}"
            )
        splits[split] = _split(mat[key][split], split, path, owner)
    sorted_attrs = sorted(splits["train"].keys())
    sorted_attrs.remove("image_index")
    test_attrs = sorted(a for a in splits["test"] if a != "image_index")
    if test_attrs != sorted_attrs:
        only_train = sorted(set(sorted_attrs) - set(test_attrs))
        only_test = sorted(set(test_attrs) - set(sorted_attrs))
        raise DatasetFormatError(
            f"{owner}: {path}: the train split has {len(sorted_attrs)} attributes and the test split "
            f"{len(test_attrs)} (only in train: {', '.join(only_train) or '-'}; only in test: "
            f"{', '.join(only_test) or '-'}); both need the same attributes (use the file from {url})"
        )
    for split, annotation in splits.items():
        count = len(annotation["image_index"])
        wrong = [a for a in sorted_attrs if len(annotation[a]) != count]
        if wrong:
            raise DatasetFormatError(
                f"{owner}: {path}: in the {split} split, {', '.join(wrong)} "
                f"{'has' if len(wrong) == 1 else 'have'} {len(annotation[wrong[0]])} values for "
                f"{count} identities in image_index; each attribute needs one value per identity"
            )
    return sorted_attrs, splits


def attribute_items(
    owner: str,
    dir_path: str,
    annotation: dict[str, Any],
    sorted_attrs: list[str],
    mat_path: str,
    cameras: tuple[int, int],
    junk_pids: tuple[int, ...] = (),
    max_pid: Optional[int] = None,
) -> list[tuple[str, np.ndarray]]:
    """``(img_path, labels)`` of the ``*.jpg`` images of ``dir_path`` (sorted by path; upstream's
    glob order is the file system's), labels ``value - 1`` per attribute of the image's identity.
    Images of ``junk_pids`` are left out; a name that does not parse or a camera outside
    ``cameras`` is skipped with one warning; an identity missing from the file is an error."""
    index_of = {pid: i for i, pid in enumerate(annotation["image_index"])}
    columns = [annotation[a] for a in sorted_attrs]
    low, high = cameras
    unknown: list[tuple[str, str]] = []  # images whose identity the file does not list

    def parse(img_path: str) -> Optional[tuple[str, np.ndarray]]:
        match = PATTERN.search(os.path.basename(img_path))
        if match is None:
            raise MalformedEntryError("no <pid>_c<camera> in the name")
        pid, camid = map(int, match.groups())
        if pid in junk_pids:
            return None  # junk images are just ignored
        if not low <= camid <= high or pid < 0 or (max_pid is not None and pid > max_pid):
            raise MalformedEntryError(f"identity {pid} / camera {camid} out of range")
        img_index = index_of.get(str(pid).zfill(4))
        if img_index is None:
            unknown.append((str(pid).zfill(4), img_path))
            return None
        attrs = np.array([int(column[img_index]) - 1 for column in columns], dtype=np.float32)
        return img_path, attrs

    entries = [(p, p) for p in list_images(dir_path, extensions=(".jpg",))]
    items = parse_entries(owner, dir_path, entries, parse, "<pid>_c<camera>_....jpg")
    if unknown:
        raise DatasetFormatError(
            f"{owner}: {mat_path} has no attributes for identity {unknown[0][0]} ({unknown[0][1]}"
            f"{f' and {len(unknown) - 1} more images' if len(unknown) > 1 else ''}); "
            f"the attribute file must belong to the images in {dir_path}"
        )
    return items
