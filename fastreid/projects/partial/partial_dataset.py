"""Partial and occluded re-ID test sets (upstream PartialReID's ``partial_dataset``): Partial-REID,
Partial-iLIDS and Occluded-REID, under upstream's names and folders.

Each is a test set only (no training split: upstream trains on Market-1501 and tests here). A
query image shows part of a person (cropped, or occluded by an object); the gallery holds whole
bodies. File names are ``<pid>_<number>.jpg``: as upstream, the first number is the person id and
the number after the underscore is the camera id, so a gallery image with the query's person id
and number is left out of the ranking (Market's protocol, which evaluation applies to every set).

Differences from upstream's reader, none of which changes what it reads from a well-formed set:
the name is parsed from the file's own name (upstream searches the whole path, so a data sets
folder such as ``/mnt/disk1_2`` gave every image pid 1, camera 2), images are listed in sorted
order (upstream: the file system's order), and a missing folder, an empty folder or a file name
that does not parse is a one-line error naming it.
"""

from __future__ import annotations

import glob
import os
import re

from fastreid.data.datasets import DATASET_REGISTRY
from fastreid.data.datasets.bases import DatasetFormatError, DatasetUsageError, ImageDataset

from ..registration import register_once

__all__ = ["PartialREID", "PartialiLIDS", "OccludedREID", "PARTIAL_DATASETS", "process_test"]

#: ``<pid>_<number>`` at the start of a file name (upstream's pattern).
_NAME = re.compile(r"([-\d]+)_(\d+)")

SYNTHETIC_COMMAND = "python -m fastreid.data.synthetic.partial --root {root}"


def _parse_folder(folder: str, owner: str) -> list[tuple[str, int, int]]:
    paths = sorted(glob.glob(os.path.join(folder, "*.jpg")))
    if not paths:
        raise DatasetFormatError(
            f"{owner}: no .jpg image in {folder}: put the set's images there "
            f"(named <pid>_<number>.jpg), or make a synthetic set with {SYNTHETIC_COMMAND.format(root='<root>')}"
        )
    items = []
    for path in paths:
        match = _NAME.match(os.path.basename(path))
        if match is None:
            raise DatasetFormatError(
                f"{owner}: {path}: the file name must start with <pid>_<number> (e.g. 001_01.jpg); "
                "rename the file or move it out of the folder"
            )
        pid, camid = map(int, match.groups())
        items.append((path, pid, camid))
    return items


def process_test(query_path: str, gallery_path: str, owner: str = "partial set") -> tuple[list, list]:
    """``(query, gallery)`` lists of ``(img_path, pid, camid)`` of two folders (upstream's function)."""
    return _parse_folder(query_path, owner), _parse_folder(gallery_path, owner)


class _PartialTestSet(ImageDataset):
    """A test-only set: ``query_folder`` (partial or occluded bodies) and ``gallery_folder``
    (whole bodies) under ``<root>/<folder>``."""

    folder = ""
    query_folder = ""
    gallery_folder = ""
    synthetic_available = True
    synthetic_command = SYNTHETIC_COMMAND

    def __init__(self, root: str = "datasets", **kwargs) -> None:
        self.root = root
        self.query_dir = os.path.join(root, self.folder, self.query_folder)
        self.gallery_dir = os.path.join(root, self.folder, self.gallery_folder)
        self.check_before_run([self.query_dir, self.gallery_dir], root=root)
        name = type(self).__name__
        super().__init__(
            [],
            lambda: _parse_folder(self.query_dir, name),
            lambda: _parse_folder(self.gallery_dir, name),
            **kwargs,
        )

    @property
    def train(self) -> list:
        raise DatasetUsageError(
            f"{type(self).__name__} is a test-only data set (a partial/occluded query set and its gallery, "
            "as in upstream's PartialReID): list it in DATASETS.TESTS and train on another set, "
            "e.g. DATASETS.NAMES ('Market1501',)"
        )

    def combine_all(self) -> None:
        """Nothing to combine: a partial set has no training split (its images are all test)."""

    def show_summary(self) -> None:
        self.show_test()


class PartialREID(_PartialTestSet):
    """Partial-REID (Zheng et al., ICCV 2015): 60 persons, 5 partial (cropped) query images and
    5 whole-body gallery images each."""

    dataset_name = "partialreid"
    folder = "Partial_REID"
    query_folder = "partial_body_images"
    gallery_folder = "whole_body_images"
    url = (
        "https://github.com/JDAI-CV/fast-reid/tree/master/projects/PartialReID (Partial_REID in its archive)"
    )
    layout = """\
  {root}/Partial_REID/
      partial_body_images/   001_001.jpg ...   (query: <pid>_<number>.jpg)
      whole_body_images/     001_006.jpg ...   (gallery)"""


class PartialiLIDS(_PartialTestSet):
    """Partial-iLIDS (Zheng et al., ICCV 2015): 119 persons, one occluded query and one whole-body
    gallery image each."""

    dataset_name = "partialilids"
    folder = "PartialiLIDS"
    query_folder = "query"
    gallery_folder = "gallery"
    url = (
        "https://github.com/JDAI-CV/fast-reid/tree/master/projects/PartialReID (PartialiLIDS in its archive)"
    )
    layout = """\
  {root}/PartialiLIDS/
      query/     001_1.jpg ...   (<pid>_<number>.jpg)
      gallery/   001_2.jpg ..."""


class OccludedREID(_PartialTestSet):
    """Occluded-REID (Zhuo et al., ICME 2018): 200 persons, 5 occluded query images and 5
    whole-body gallery images each."""

    dataset_name = "occludereid"  # upstream's spelling
    folder = "OccludedREID"
    query_folder = "query"
    gallery_folder = "gallery"
    url = (
        "https://github.com/JDAI-CV/fast-reid/tree/master/projects/PartialReID (OccludedREID in its archive)"
    )
    layout = """\
  {root}/OccludedREID/
      query/     001_01.jpg ...   (occluded bodies: <pid>_<number>.jpg)
      gallery/   001_06.jpg ...   (whole bodies)"""


PARTIAL_DATASETS = ("PartialREID", "PartialiLIDS", "OccludedREID")

for _cls in (PartialREID, PartialiLIDS, OccludedREID):
    register_once(DATASET_REGISTRY, _cls)
