"""Base classes of the re-ID datasets: train / query / gallery lists of (img_path, pid, camid)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from typing import Any, Callable, Union

from tabulate import tabulate
from termcolor import colored

from fastreid.utils.errors import UserError

__all__ = [
    "Dataset",
    "ImageDataset",
    "TrainOnlyDataset",
    "DatasetNotFoundError",
    "DatasetFormatError",
    "DatasetUsageError",
    "SYNTHETIC_COMMAND",
]

logger = logging.getLogger(__name__)

Item = tuple  # (img_path, pid, camid)
Items = Union[list, Callable[[], list]]

SYNTHETIC_COMMAND = "python -m fastreid.data.synthetic --root {root}"


class DatasetNotFoundError(UserError, FileNotFoundError):
    """A dataset folder or list file is missing. The message says where we looked and what to do."""


class DatasetFormatError(UserError, ValueError):
    """A data set folder or list holds nothing usable: no images, or no name/line that parses."""


class DatasetUsageError(UserError, ValueError):
    """A data set used where it cannot serve, e.g. a training-only set in DATASETS.TESTS."""


class Dataset:
    """Train, query and gallery lists of ``(img_path, pid, camid)``.

    The lists may be given as callables; they are parsed on first access so that building a
    test loader does not scan the training folder. ``_junk_pids`` are left out by
    :meth:`combine_all`. With ``combineall`` the query and gallery identities join the training
    set (under a ``<name>_test_`` prefix, as upstream does).
    """

    _junk_pids: Sequence = ()
    dataset_name = "unknown"
    #: Where the data set is published (named in the "not found" message).
    url = ""
    #: The expected folder tree, ``{root}`` standing for the data sets folder.
    layout = ""
    #: Training-only sets add identities to training and cannot be test sets.
    train_only = False

    def __init__(
        self,
        train: Items,
        query: Items,
        gallery: Items,
        transform: Any = None,
        mode: str = "train",
        combineall: bool = False,
        verbose: bool = True,
        **kwargs,
    ):
        if mode not in ("train", "query", "gallery"):
            raise ValueError(f"Invalid mode {mode!r}; expected one of train, query, gallery")
        self._train = train
        self._query = query
        self._gallery = gallery
        self.transform = transform  # upstream keeps it; the loaders get theirs from build_transforms
        self.mode = mode
        self.combineall = combineall
        self.verbose = verbose
        if combineall:
            self.combine_all()

    @property
    def data(self) -> list:
        """The list ``mode`` names (upstream's attribute)."""
        return {"train": self.train, "query": self.query, "gallery": self.gallery}[self.mode]

    @property
    def train(self) -> list:
        if callable(self._train):
            self._train = self._train()
        return self._train

    @property
    def query(self) -> list:
        if callable(self._query):
            self._query = self._query()
        return self._query

    @property
    def gallery(self) -> list:
        if callable(self._gallery):
            self._gallery = self._gallery()
        return self._gallery

    @property
    def num_train_pids(self) -> int:
        return self.get_num_pids(self.train)

    @property
    def num_train_cams(self) -> int:
        return self.get_num_cams(self.train)

    @staticmethod
    def parse_data(data: Iterable[Item]) -> tuple[int, int]:
        """Number of distinct person ids and cameras in ``data``."""
        pids, cams = set(), set()
        for item in data:
            pids.add(item[1])
            cams.add(item[2])
        return len(pids), len(cams)

    def get_num_pids(self, data: Iterable[Item]) -> int:
        return self.parse_data(data)[0]

    def get_num_cams(self, data: Iterable[Item]) -> int:
        return self.parse_data(data)[1]

    def combine_all(self) -> None:
        """Add query and gallery (junk ids excluded) to the training set."""
        combined = list(self.train)
        for data in (self.query, self.gallery):
            for img_path, pid, camid in data:
                if pid in self._junk_pids:
                    continue
                combined.append(
                    (img_path, f"{self.dataset_name}_test_{pid}", f"{self.dataset_name}_test_{camid}")
                )
        self._train = combined

    def check_before_run(
        self, required: Union[str, Sequence[str]], root: str = "datasets", layout: str = ""
    ) -> None:
        """Raise :class:`DatasetNotFoundError` naming the first missing path and the layout."""
        if isinstance(required, str):
            required = [required]
        for path in required:
            if not os.path.exists(path):
                raise DatasetNotFoundError(self._missing_message(path, root, layout))

    def locate(self, root: str, candidates: Sequence[str], probe: str = "") -> str:
        """The first of ``candidates`` (folders relative to ``root``; "" is ``root`` itself) that
        exists and, when ``probe`` is given, holds ``probe``. Logs which one is used; raises
        :class:`DatasetNotFoundError` listing them all when none fits."""
        for rel in candidates:
            folder = os.path.join(root, rel) if rel else root
            if os.path.isdir(folder) and (not probe or os.path.exists(os.path.join(folder, probe))):
                if rel != candidates[0]:
                    logger.info(
                        f"{type(self).__name__}: using the folder layout {folder!r} "
                        f"(alias of {os.path.join(root, candidates[0])!r})"
                    )
                return folder
        looked = " or ".join(os.path.join(root, rel) if rel else root for rel in candidates)
        if probe:
            looked += f" (holding {probe})"
        raise DatasetNotFoundError(self._missing_message(looked, root, self.layout))

    def _missing_message(self, path: str, root: str, layout: str) -> str:
        lines = [f"{type(self).__name__}: not found: {path}"]
        lines.append(f"Datasets are looked for under '{root}' (set FASTREID_DATASETS to change it).")
        layout = layout or self.layout
        if layout:
            lines.append("Expected layout:\n" + layout.replace("{root}", root).rstrip())
        if self.url:
            lines.append(f"The data set is published at {self.url}")
        if getattr(self, "synthetic_available", False):
            lines.append(
                "No download? Make a synthetic set with: "
                + getattr(self, "synthetic_command", SYNTHETIC_COMMAND).replace("{root}", root)
            )
        return "\n".join(lines)

    def _table(self, rows: list) -> str:
        table = tabulate(
            rows, headers=["subset", "# ids", "# images", "# cameras"], tablefmt="pipe", numalign="left"
        )
        return colored(table, "cyan")

    def show_train(self) -> None:
        pids, cams = self.parse_data(self.train)
        logger.info(
            f"=> Loaded {type(self).__name__} in csv format: \n"
            + self._table([["train", pids, len(self.train), cams]])
        )

    def show_test(self) -> None:
        rows = []
        for name, data in (("query", self.query), ("gallery", self.gallery)):
            pids, cams = self.parse_data(data)
            rows.append([name, pids, len(data), cams])
        logger.info(f"=> Loaded {type(self).__name__} in csv format: \n" + self._table(rows))

    def show_summary(self) -> None:
        rows = []
        for name, data in (("train", self.train), ("query", self.query), ("gallery", self.gallery)):
            pids, cams = self.parse_data(data)
            rows.append([name, pids, len(data), cams])
        logger.info(f"=> Loaded {type(self).__name__}: \n" + self._table(rows))


class ImageDataset(Dataset):
    """A dataset of single images (upstream's name, kept for subclasses written for upstream)."""


class TrainOnlyDataset(ImageDataset):
    """A set upstream uses for training only: its identities join ``DATASETS.NAMES``; it has no
    query or gallery, so naming it in ``DATASETS.TESTS`` is a :class:`DatasetUsageError`."""

    train_only = True

    def __init__(self, train: Items, **kwargs):
        super().__init__(train, [], [], **kwargs)

    def _not_a_test_set(self) -> DatasetUsageError:
        name = type(self).__name__
        return DatasetUsageError(
            f"{name} is a training-only data set (it has no query/gallery split, as in upstream FastReID): "
            f"list it in DATASETS.NAMES to add its identities to training, and evaluate on another "
            f"set in DATASETS.TESTS."
        )

    @property
    def query(self) -> list:
        raise self._not_a_test_set()

    @property
    def gallery(self) -> list:
        raise self._not_a_test_set()

    def combine_all(self) -> None:
        """Nothing to add: every image is already in training."""

    def show_test(self) -> None:
        raise self._not_a_test_set()

    def show_summary(self) -> None:
        self.show_train()
