"""The config keys of image retrieval (upstream FastRetri's ``add_retri_config``)."""

from __future__ import annotations

from typing import Any

__all__ = ["add_retri_config", "DEFAULT_RECALLS"]

#: Upstream's default ``TEST.RECALLS`` (CUB-200-2011's and Cars-196's usual cut-offs).
DEFAULT_RECALLS = (1, 2, 4, 8, 16, 32)


def add_retri_config(cfg: Any) -> Any:
    """Add upstream FastRetri's key with upstream's default, leaving it alone when it is there
    already (calling this twice, or after a config file set it, changes nothing). Returns ``cfg``.

    - ``TEST.RECALLS`` ([1, 2, 4, 8, 16, 32]): the K of each Recall@K the evaluator reports; the
      first one is ``metric`` (what ``model_best.pth`` follows). Upstream's SOP config uses
      [1, 10, 100, 1000], its In-Shop config [1, 10, 20, 30, 40, 50].
    """
    if "RECALLS" not in cfg.TEST:
        cfg.TEST.RECALLS = list(DEFAULT_RECALLS)
    return cfg
