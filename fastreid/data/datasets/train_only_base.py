"""The parser the training-only sets share: each set declares where its images are and which part
of an image's path holds the identity and the camera; one piece of code lists and parses them.

A set (one module per set, upstream's file names: ``grid.py``, ``viper.py`` ...) sets ``folder_names`` (upstream's
folder first, then accepted aliases), ``image_dirs`` and ``tree`` (where the images sit),
``extensions``, and ``pid`` / ``camera``: a :class:`Field` of the path, or a fixed string.
Sets whose names need more (a regular expression, a list file) override :meth:`item` or
:meth:`parse`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Callable, Optional, Union

from .bases import DatasetNotFoundError, TrainOnlyDataset
from .parsing import MalformedEntryError, list_images, list_subfolders, parse_entries

__all__ = ["Field", "NameFieldsSet", "TrainOnlySet", "field", "before"]


def field(value: str, sep: str, index: int) -> str:
    """``value.split(sep)[index]``, which must exist and be non-empty."""
    parts = value.split(sep)
    if len(parts) <= index or not parts[index]:
        raise MalformedEntryError(f"no field {index + 1} separated by {sep!r}")
    return parts[index]


def before(value: str, sep: str) -> str:
    """The part of ``value`` before the first ``sep``, which must be there and leave something."""
    head, found, _ = value.partition(sep)
    if not found or not head:
        raise MalformedEntryError(f"no {sep!r} in the name")
    return head


def path_part(path: str, level: int) -> str:
    """Component ``level`` of ``path`` counted from its end: 0 the file name, 1 its folder, ..."""
    for _ in range(level):
        path = os.path.dirname(path)
    return os.path.basename(path)


@dataclass(frozen=True)
class Field:
    """A label read from an image path: the path component ``level`` (0 the file name, 1 its
    folder, 2 the folder above), whole when ``sep`` is empty, else its field ``index`` split at
    ``sep`` (see :func:`field`), or with ``first=True`` the part before the first ``sep`` (see
    :func:`before`, which needs the separator to be there)."""

    level: int = 0
    sep: str = ""
    index: int = 0
    first: bool = False

    def __call__(self, path: str) -> str:
        value = path_part(path, self.level)
        if not self.sep:
            return value
        return before(value, self.sep) if self.first else field(value, self.sep, self.index)


#: Where a label comes from: a :class:`Field` of the image path, or the same string for every image.
Rule = Union[Field, str]

#: How images sit below an image folder: its own files, ``<pid>/<image>``,
#: ``<camera>/<pid>/<image>``, any depth, or any depth below its sub-folders.
TREES = ("flat", "per_identity", "camera_identity", "recursive", "subfolders")


def list_tree(folder: str, tree: str, extensions: Sequence[str]) -> list[str]:
    """The image files below ``folder`` laid out as ``tree`` (one of :data:`TREES`), sorted."""
    if tree == "flat":
        return list_images(folder, extensions)
    if tree == "per_identity":
        return [
            p for pid in list_subfolders(folder) for p in list_images(os.path.join(folder, pid), extensions)
        ]
    if tree == "camera_identity":
        return [
            p
            for cam in list_subfolders(folder)
            for p in list_tree(os.path.join(folder, cam), "per_identity", extensions)
        ]
    if tree == "recursive":
        return list_images(folder, extensions, recursive=True)
    if tree == "subfolders":
        return [p for p in list_images(folder, extensions, recursive=True) if os.path.dirname(p) != folder]
    raise ValueError(f"unknown image tree {tree!r}; one of {', '.join(TREES)}")


class TrainOnlySet(TrainOnlyDataset):
    """A training-only set read by the shared parser: find the folder (upstream's name first, then
    aliases), list the images, label each by the ``pid`` and ``camera`` rules, prefix the labels
    with ``dataset_name``."""

    folder_names: Sequence[str] = ()
    #: A file or folder the data folder must hold to be the one (empty: any existing folder).
    probe = ""
    #: Image folders below the data folder ("" the folder itself), all required unless
    #: ``optional_dirs`` (then missing ones are skipped).
    image_dirs: Sequence[str] = ("",)
    optional_dirs = False
    tree = "flat"
    extensions: Sequence[str] = (".jpg",)
    pid: Rule = Field(level=1)
    camera: Rule = "cam0"
    #: What a valid entry looks like, for messages.
    expected = ""

    def __init__(self, root: str = "datasets", **kwargs):
        self.root = root
        self.data_dir = self.locate(root, self.folder_names, probe=self.probe)
        super().__init__(lambda: self.parse(self.data_dir), **kwargs)

    def label(self, value: str) -> str:
        return f"{self.dataset_name}_{value}"

    def parse_files(self, where: str, paths: list[str], parse: Callable[[str], Optional[tuple]]) -> list:
        return parse_entries(type(self).__name__, where, [(p, p) for p in paths], parse, self.expected)

    def image_folders(self, folder: str) -> list[str]:
        """The folders holding the images (missing required ones are a :class:`DatasetNotFoundError`)."""
        dirs = [os.path.join(folder, d) if d else folder for d in self.image_dirs]
        if self.optional_dirs:
            return [d for d in dirs if os.path.isdir(d)]
        for d in dirs:
            if not os.path.isdir(d):
                raise DatasetNotFoundError(self._missing_message(d, self.root, self.layout))
        return dirs

    def where(self, folder: str) -> str:
        """The image folders as messages name them."""
        if tuple(self.image_dirs) == ("",):
            return folder
        return " + ".join(os.path.join(folder, d) for d in self.image_dirs)

    def parse(self, folder: str) -> list:
        paths = [p for d in self.image_folders(folder) for p in list_tree(d, self.tree, self.extensions)]
        return self.parse_files(self.where(folder), paths, self.item)

    def item(self, path: str) -> tuple:
        """``(path, pid, camid)`` of one image (labels prefixed); raises :class:`MalformedEntryError` for a
        name that does not follow the set's convention."""
        return (path, self.label(self._read(self.pid, path)), self.label(self._read(self.camera, path)))

    @staticmethod
    def _read(rule: Rule, path: str) -> str:
        return rule if isinstance(rule, str) else rule(path)


class NameFieldsSet(TrainOnlySet):
    """A flat folder of ``<pid>_<camera>_<...>`` images."""

    pid = Field(sep="_", index=0)
    camera = Field(sep="_", index=1)
