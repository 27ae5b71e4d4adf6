"""The config keys of partial re-identification (upstream PartialReID's ``add_partialreid_config``)."""

from __future__ import annotations

from typing import Any

from fastreid.config import CfgNode as CN

__all__ = ["add_partialreid_config"]


def add_partialreid_config(cfg: Any) -> Any:
    """Add upstream PartialReID's key with upstream's default, leaving it (and its value) alone
    when it is there already, so calling it twice, or after a config file added it, changes
    nothing. Returns ``cfg``.

    - ``TEST.DSR.ENABLED`` (True): rank with the global distance mixed with the deep spatial
      feature reconstruction (DSR) distance (:mod:`.dsr_distance`); False: the global distance alone.
    """
    if "DSR" not in cfg.TEST:
        cfg.TEST.DSR = CN({"ENABLED": True})
    if "ENABLED" not in cfg.TEST.DSR:
        cfg.TEST.DSR.ENABLED = True
    return cfg
