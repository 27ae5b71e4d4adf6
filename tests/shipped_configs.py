"""The config files the repository ships, split by task.

The tests that build, train or read the data of *every* config (tests/test_all_configs_build.py,
tests/data/test_datasets_all.py) are about re-ID configs:
person and vehicle re-identification on the standard data sets. A config that names one of a task
family's names (:data:`fastreid.config.families.FAMILIES`: attributes, classification, retrieval,
face, partial re-ID, distillation) trains another task on other data; its family's own tests build
and train it. The family table decides, so a new family's configs need no list here.
"""

from __future__ import annotations

import glob
import os

from fastreid.config import get_cfg
from fastreid.config.families import family_names

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _names(path: str) -> set[str]:
    cfg = get_cfg()
    cfg.merge_from_file(path)
    model = cfg.MODEL
    return {
        model.META_ARCHITECTURE,
        model.HEADS.NAME,
        model.BACKBONE.NAME,
        *cfg.DATASETS.NAMES,
        *cfg.DATASETS.TESTS,
    }


def is_family_config(path: str) -> bool:
    """Whether the config at ``path`` (its ``_BASE_`` chain merged) names a task family's name."""
    return bool(_names(path) & set(family_names()))


def reid_configs(*patterns: str) -> list[str]:
    """Paths (relative to the repository) of the re-ID configs matching the glob ``patterns``
    (default: everything under configs/), sorted."""
    found = {
        os.path.relpath(p, REPO)
        for pattern in patterns or ("configs/**/*.yml",)
        for p in glob.glob(os.path.join(REPO, pattern), recursive=True)
    }
    return sorted(p for p in found if not is_family_config(os.path.join(REPO, p)))
