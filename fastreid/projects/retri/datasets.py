"""The retrieval data sets of upstream FastRetri, registered in ``DATASET_REGISTRY`` under
upstream's names: ``CUB``, ``Cars196``, ``SOP`` and ``InShop``.

Each folder holds list files of ``<image path relative to the folder>,<class label>`` lines (the
layout of the ``dml_cross_entropy`` preparation upstream points to). ``train.txt`` trains;
``test.txt`` is both query and gallery (each test image is a query against all the others), except
In-Shop, whose ``test_query.txt`` queries ``test_gallery.txt``. As upstream: training labels are
prefixed with the set's name (``"cub_12"``), test labels stay the file's strings, every camera is
``"0"``, and the test classes are classes never seen in training.

What upstream does not: a missing folder or list file, a line that is not ``path,label``, an
image a list names that is not there, an empty list and a class in both the training and the
test lists stop with a one-line :class:`~fastreid.data.datasets.bases.DatasetNotFoundError` /
:class:`~fastreid.data.datasets.bases.DatasetFormatError` naming the file and the fix.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from fastreid.data.datasets import DATASET_REGISTRY
from fastreid.data.datasets.bases import DatasetFormatError, ImageDataset
from fastreid.projects.registration import register_once

__all__ = ["Cars196", "CUB", "SOP", "InShop", "RETRIEVAL_DATASETS", "read_label_file"]

logger = logging.getLogger(__name__)

SYNTHETIC = "python -m fastreid.data.synthetic.retrieval --root {root}"


def read_label_file(path: str, folder: str) -> list[tuple[str, str, int]]:
    """``(absolute image path, label, line number)`` of each non-empty line of a list file.

    A line is ``<image path relative to folder>,<label>`` (split at its last comma, so a path may
    hold commas). A malformed line, a listed image that does not exist or a file with no line is a
    :class:`DatasetFormatError` naming the file (and line)."""
    entries: list[tuple[str, str, int]] = []
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, start=1):
            line = raw.strip()
            if not line:
                continue
            name, comma, label = line.rpartition(",")
            name, label = name.strip(), label.strip()
            if not comma or not name or not label:
                raise DatasetFormatError(
                    f"{path}, line {number}: expected '<image path>,<class label>', got {line!r}: "
                    "write one image per line, its path relative to the data set folder, a comma and its class"
                )
            image = os.path.join(folder, name)
            if not os.path.isfile(image):
                raise DatasetFormatError(
                    f"{path}, line {number}: image not found: {image}: put the image there or remove the line"
                )
            entries.append((image, label, number))
    if not entries:
        raise DatasetFormatError(
            f"{path} lists no image: write one '<image path>,<class label>' line per image"
        )
    return entries


def _layout(folder: str, lists: Sequence[str]) -> str:
    files = "\n".join(f"  {name:<17} one '<image path>,<class label>' line per image" for name in lists)
    return f"{{root}}/{folder}/\n{files}\n  <the images, at the paths the lists name>"


class Cars196(ImageDataset):
    """Cars-196 (``Cars_196/train.txt`` and ``test.txt``); the base of the other three, as upstream's."""

    dataset_dir = "Cars_196"
    dataset_name = "cars"
    #: the retrieval evaluator tests it (the loaders are re-ID's: each class an identity)
    retrieval = True
    url = "https://github.com/jeromerony/dml_cross_entropy (data preparation)"
    synthetic_available = False
    synthetic_command = SYNTHETIC
    #: the list files: training, then query, then gallery ("" when the query list is the gallery too)
    lists: tuple[str, str, str] = ("train.txt", "test.txt", "")

    def __init__(self, root: str = "datasets", **kwargs):
        self.root = root
        self.dataset_dir = os.path.join(root, type(self).dataset_dir)
        self.layout = _layout(type(self).dataset_dir, [name for name in self.lists if name])
        files = [os.path.join(self.dataset_dir, name) if name else "" for name in self.lists]
        self.check_before_run([self.dataset_dir, *(f for f in files if f)], root=root)
        self.label_files = [f for f in files if f]

        train = self.process_label_file(files[0], is_train=True)
        query = self.process_label_file(files[1], is_train=False)
        gallery = self.process_label_file(files[2], is_train=False) if files[2] else []
        self._check_disjoint(train, files[0], query + gallery, [f for f in files[1:] if f])
        if gallery:
            self._check_queries_have_matches(query, gallery, files[1], files[2])
        super().__init__(train, query, gallery, **kwargs)

    def process_label_file(self, file: str, is_train: bool) -> list[tuple[str, str, str]]:
        """``(image path, label, "0")`` per line of ``file`` (upstream's method); training labels
        get the ``"<dataset_name>_"`` prefix."""
        prefix = f"{self.dataset_name}_" if is_train else ""
        return [(image, prefix + label, "0") for image, label, _ in read_label_file(file, self.dataset_dir)]

    def _check_disjoint(self, train: list, train_file: str, test: list, test_files: Sequence[str]) -> None:
        prefix = f"{self.dataset_name}_"
        train_labels = {item[1][len(prefix) :] for item in train}
        shared = sorted(train_labels & {item[1] for item in test})
        if shared:
            more = f" (and {len(shared) - 1} more)" if len(shared) > 1 else ""
            raise DatasetFormatError(
                f"{type(self).__name__}: class {shared[0]!r}{more} is in both {train_file} and "
                f"{' / '.join(test_files)}: retrieval is tested on classes not seen in training; "
                "give the test images their own classes (e.g. CUB-200-2011: 1-100 train, 101-200 test)"
            )

    def _check_queries_have_matches(
        self, query: list, gallery: list, query_file: str, gallery_file: str
    ) -> None:
        in_gallery = {item[1] for item in gallery}
        lone = sorted({item[1] for item in query} - in_gallery)
        if lone:
            logger.warning(
                f"{type(self).__name__}: {len(lone)} class(es) of {query_file} (e.g. {lone[0]!r}) have no image in "
                f"{gallery_file}; their queries count as misses in Recall@K and are left out of mAP@R"
            )


class CUB(Cars196):
    """CUB-200-2011 (``CUB_200_2011/train.txt`` and ``test.txt``)."""

    dataset_dir = "CUB_200_2011"
    dataset_name = "cub"
    synthetic_available = True


class SOP(Cars196):
    """Stanford Online Products (``Stanford_Online_Products/train.txt`` and ``test.txt``)."""

    dataset_dir = "Stanford_Online_Products"
    dataset_name = "sop"


class InShop(Cars196):
    """In-Shop Clothes Retrieval (``InShop/train.txt``, ``test_query.txt`` and ``test_gallery.txt``):
    the queries are searched in the gallery only."""

    dataset_dir = "InShop"
    dataset_name = "inshop"
    lists = ("train.txt", "test_query.txt", "test_gallery.txt")


RETRIEVAL_DATASETS = ("CUB", "Cars196", "SOP", "InShop")

for _cls in (Cars196, CUB, SOP, InShop):
    register_once(DATASET_REGISTRY, _cls)
