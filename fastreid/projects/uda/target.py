"""The target domain: the unlabelled training images a ClusterContrast run clusters and trains on.

- ``DATASETS.NAMES``: registered data sets whose **training split** is the target (e.g.
  ``("DukeMTMC",)`` adapts to DukeMTMC-reID's training images). Their identities are kept apart in
  :attr:`TargetImages.identities`, read by nothing but the measure of the pseudo labels: training
  sees the paths, the cameras and the pseudo labels only.
- ``DATASETS.UNLABELED_FOLDERS``: folders of images (searched recursively, sorted by path), e.g.
  crops from new cameras; no identities, camera 0.

Images keep that order: the data sets in their order, each in its own training order, then the
folders.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from fastreid.data.build import datasets_root
from fastreid.data.datasets import DATASET_REGISTRY
from fastreid.data.datasets.bases import DatasetFormatError, DatasetUsageError
from fastreid.data.datasets.parsing import list_images
from fastreid.utils import comm

__all__ = ["TargetImages", "target_images"]

logger = logging.getLogger("fastreid.uda")


@dataclass
class TargetImages:
    """The target's images: ``paths`` and ``camids`` (what training may read) and, separately,
    ``identities`` (one per image where every source has them, else None: only for measuring)."""

    paths: list[str]
    camids: list[Any]
    identities: Optional[list[Any]] = None
    sources: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.paths)

    def items(self, labels: Sequence[int] | np.ndarray) -> list[tuple[str, int, Any]]:
        """``(path, pseudo label, camid)`` of every image whose label is not -1 (an outlier)."""
        return [(p, int(y), c) for p, y, c in zip(self.paths, labels, self.camids) if y >= 0]


def _registered_train_split(name: str) -> tuple[list[str], list[Any], list[Any]]:
    data = DATASET_REGISTRY.get(name)(root=datasets_root())
    if getattr(data, "task", "reid") != "reid":
        raise DatasetUsageError(
            f"DATASETS.NAMES: {name} is a data set for {data.task} recognition; a ClusterContrast target "
            "is a re-ID data set's training images or DATASETS.UNLABELED_FOLDERS"
        )
    if comm.is_main_process():
        data.show_train()
    records = list(data.train)
    return [r[0] for r in records], [r[2] for r in records], [r[1] for r in records]


def target_images(cfg: Any) -> TargetImages:
    """The target of ``cfg`` (``DATASETS.NAMES`` then ``DATASETS.UNLABELED_FOLDERS``)."""
    paths: list[str] = []
    camids: list[Any] = []
    identities: Optional[list[Any]] = []
    sources: list[str] = []
    for name in cfg.DATASETS.NAMES:
        p, c, ids = _registered_train_split(name)
        paths += p
        camids += c
        if identities is not None:
            identities += ids
        sources.append(name)
    for folder in cfg.DATASETS.get("UNLABELED_FOLDERS", []):
        found = list_images(folder, recursive=True)
        if not found:
            raise DatasetFormatError(
                f"DATASETS.UNLABELED_FOLDERS: {folder} holds no image (.jpg, .jpeg, .png, .bmp, in it or its "
                "sub-folders): point it at a folder of person crops"
            )
        paths += found
        camids += [0] * len(found)
        identities = None  # a folder has no identities: the pseudo labels cannot be measured
        sources.append(folder)
        logger.info(f"Target folder {folder}: {len(found)} images")
    if not paths:
        raise DatasetFormatError(
            "ClusterContrast has no target images: name a re-ID data set in DATASETS.NAMES (its training "
            "images are used, without their identities) or folders in DATASETS.UNLABELED_FOLDERS"
        )
    return TargetImages(paths, camids, identities, sources)
