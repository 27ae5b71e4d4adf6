"""The config keys of attribute recognition (upstream FastAttr's ``add_attr_config``)."""

from __future__ import annotations

from typing import Any

from fastreid.config import CfgNode as CN

__all__ = ["add_attr_config"]


def add_attr_config(cfg: Any) -> Any:
    """Add upstream FastAttr's keys with upstream's defaults, leaving keys that are already there
    (and their values) alone, so calling it twice, or after a config file added them, changes
    nothing. Returns ``cfg``.

    - ``MODEL.LOSSES.BCE.WEIGHT_ENABLED`` (True): weight the binary cross-entropy of each
      attribute by how often it is on in the training set (rare ones weigh more);
    - ``MODEL.LOSSES.BCE.SCALE`` (1.0): the factor of ``loss_bce``;
    - ``TEST.THRES`` (0.5): a score at or above it predicts the attribute on.
    """
    losses = cfg.MODEL.LOSSES
    if "BCE" not in losses:
        losses.BCE = CN({"WEIGHT_ENABLED": True})
    if "WEIGHT_ENABLED" not in losses.BCE:
        losses.BCE.WEIGHT_ENABLED = True
    if "SCALE" not in losses.BCE:
        losses.BCE.SCALE = 1.0
    if "THRES" not in cfg.TEST:
        cfg.TEST.THRES = 0.5
    return cfg
