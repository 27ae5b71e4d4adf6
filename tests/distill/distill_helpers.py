"""Shared helpers of the distillation tests (a module of its own: test files import it by name)."""

from __future__ import annotations

import os

from fastreid.config import get_cfg

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLASSES = 5


def tiny(config: str, *opts) -> object:
    """``config`` (relative to the repository) as a ResNet-18 with ``CLASSES`` identities, plus ``opts``."""
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(REPO, config))
    cfg.merge_from_list(["MODEL.HEADS.NUM_CLASSES", CLASSES, "MODEL.BACKBONE.DEPTH", "18x", *opts])
    return cfg
