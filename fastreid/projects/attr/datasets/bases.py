"""The base of the attribute data sets (upstream FastAttr's ``datasets/bases.py``): ``train``,
``val`` and ``test`` lists of ``(img_path, labels)`` with ``labels`` a float32 vector, one value
per attribute, and ``attr_dict`` (index -> attribute name).

Attribute sets are not re-ID sets: they have no ``query`` / ``gallery``. Asking for them (a re-ID
config naming an attribute set) is a one-line :class:`DatasetUsageError` saying how to train it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any, Union

import numpy as np
from tabulate import tabulate
from termcolor import colored

from fastreid.data.datasets.bases import DatasetFormatError, DatasetNotFoundError, DatasetUsageError
from fastreid.data.datasets.cuhk03 import MissingDependencyError

__all__ = [
    "Dataset",
    "AttributeItem",
    "MissingDependencyError",
    "load_mat",
    "DatasetFormatError",
    "DatasetNotFoundError",
    "DatasetUsageError",
]

logger = logging.getLogger("fastreid.attr_dataset")

AttributeItem = tuple  # (img_path, float32 labels)


def load_mat(path: str, owner: str, **kwargs: Any) -> dict:
    """``scipy.io.loadmat(path, **kwargs)`` with one-line errors naming the file."""
    try:
        from scipy.io import loadmat  # optional: scipy (the attr extra), only for .mat annotations
    except ImportError:
        raise MissingDependencyError(f"{owner}: reading {path} needs scipy: pip install scipy") from None
    try:
        return loadmat(path, **kwargs)
    except FileNotFoundError:
        raise DatasetNotFoundError(f"{owner}: not found: {path}") from None
    except NotImplementedError:  # scipy's answer to MATLAB v7.3 (HDF5) files
        raise DatasetFormatError(
            f"{owner}: {path} is a MATLAB v7.3 (HDF5) file, which scipy cannot read; "
            "save it again with save(..., '-v7') or use the file as published"
        ) from None
    except (OSError, ValueError, TypeError) as e:
        raise DatasetFormatError(f"{owner}: cannot read {path} as a MATLAB .mat file ({e})") from None


class Dataset:
    """Upstream's attribute ``Dataset(train, val, test, attr_dict, mode="train")``.

    Subclasses set ``annotation_file`` (the file the labels come from, named in errors) before
    calling ``__init__``, which checks that every label vector has one value per attribute.
    ``combineall`` (``DATASETS.COMBINEALL``) is accepted and, as upstream, has no effect.
    """

    #: What the re-ID loaders check: an attribute set is not a re-ID set.
    task = "attribute"
    #: How to train it, for the error a re-ID config naming it gets.
    usage_hint = "train it with MODEL.META_ARCHITECTURE AttrBaseline (e.g. configs/Attr/pa100.yml)"
    #: The file the labels were read from.
    annotation_file = ""
    #: Where the data set is published (named when it is not found).
    url = ""
    #: The expected folder tree, ``{root}`` standing for the data sets folder.
    layout = ""
    #: A command writing a synthetic copy, ``{root}`` standing for the data sets folder.
    synthetic_command = ""

    def __init__(
        self,
        train: list,
        val: list,
        test: list,
        attr_dict: Mapping[int, str],
        mode: str = "train",
        verbose: bool = True,
        **kwargs: Any,
    ) -> None:
        if mode not in ("train", "val", "test"):
            raise ValueError(f"Invalid mode {mode!r}; expected one of train, val, test")
        self.train = train
        self.val = val
        self.test = test
        self._attr_dict = dict(attr_dict)
        self._num_attrs = len(self._attr_dict)
        self.mode = mode
        self.verbose = verbose
        for split, items in (("train", train), ("val", val), ("test", test)):
            self._check_widths(split, items)

    def _check_widths(self, split: str, items: Sequence[AttributeItem]) -> None:
        for path, labels in items:
            width = int(np.asarray(labels).size)
            if width != self._num_attrs:
                raise DatasetFormatError(
                    f"{type(self).__name__}: {self.annotation_file or 'the annotation'} gives {path} "
                    f"({split}) {width} labels but names {self._num_attrs} attributes; every image "
                    "needs one label per attribute (use the annotation file as published)"
                )

    @property
    def data(self) -> list:
        """The split ``mode`` names (upstream's attribute)."""
        return {"train": self.train, "val": self.val, "test": self.test}[self.mode]

    @property
    def num_attrs(self) -> int:
        return self._num_attrs

    @property
    def attr_dict(self) -> dict[int, str]:
        return self._attr_dict

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int) -> AttributeItem:
        return self.data[index]

    # ------------------------------------------------------------------ not a re-ID set

    def _not_reid(self) -> DatasetUsageError:
        return DatasetUsageError(
            f"{type(self).__name__} is a pedestrian-attribute data set (images with attribute labels, "
            f"no query/gallery): {self.usage_hint}"
        )

    @property
    def query(self) -> list:
        raise self._not_reid()

    @property
    def gallery(self) -> list:
        raise self._not_reid()

    # ------------------------------------------------------------------ checks and logging

    def check_before_run(self, required_files: Union[str, Sequence[str]], root: str = "datasets") -> None:
        """Raise :class:`DatasetNotFoundError` naming the first missing path, the layout and,
        when there is one, the command that writes a synthetic copy."""
        if isinstance(required_files, str):
            required_files = [required_files]
        for path in required_files:
            if not os.path.exists(path):
                raise DatasetNotFoundError(self._missing_message(path, root))

    def _missing_message(self, path: str, root: str) -> str:
        parts = [
            f"{type(self).__name__}: not found: {path}.",
            f"Data sets are looked for under '{root}' (set FASTREID_DATASETS to change it).",
        ]
        if self.layout:
            parts.append("Expected layout: " + " ".join(self.layout.replace("{root}", root).split()))
        if self.url:
            parts.append(f"The data set is published at {self.url}.")
        if self.synthetic_command:
            parts.append("No download? Write a synthetic copy: " + self.synthetic_command.format(root=root))
        return " ".join(parts)

    def show_train(self) -> None:
        rows = [
            ["train", len(self.train)],
            ["val", len(self.val)],
            ["total", len(self.train) + len(self.val)],
        ]
        table = tabulate(rows, tablefmt="pipe", headers=["subset", "# images"], numalign="left")
        logger.info(f"=> Loaded {type(self).__name__} in csv format: \n" + colored(table, "cyan"))
        logger.info("attributes: " + ", ".join(f"{i}: {name}" for i, name in self.attr_dict.items()))
        logger.info(f"# attributes: {len(self.attr_dict)}")

    def show_test(self) -> None:
        table = tabulate(
            [["test", len(self.test)]], tablefmt="pipe", headers=["subset", "# images"], numalign="left"
        )
        logger.info(f"=> Loaded {type(self).__name__} in csv format: \n" + colored(table, "cyan"))
