"""The config keys of face recognition (upstream FastFace's ``add_face_cfg``)."""

from __future__ import annotations

from typing import Any

from fastreid.config import CfgNode as CN

__all__ = ["add_face_cfg", "add_face_config"]


def add_face_config(cfg: Any) -> Any:
    """Add upstream FastFace's keys with upstream's defaults, leaving keys that are already there
    (and their values) alone, so calling it twice, or after a config file added them, changes
    nothing. Returns ``cfg``.

    - ``DATASETS.REC_PATH`` (""): an MXNet RecordIO training file (``train.rec`` next to its
      ``train.idx``), read instead of ``DATASETS.NAMES`` when set;
    - ``MODEL.BACKBONE.DROPOUT`` (0.0): dropout after the IResNet backbone's last BatchNorm;
    - ``MODEL.HEADS.PFC.ENABLED`` (False): train the classifier as Partial FC (class centres
      outside the model, sharded across processes, a sample of them per batch);
    - ``MODEL.HEADS.PFC.SAMPLE_RATE`` (0.1): the fraction of each process's class centres a
      batch trains against (its own classes always among them); 1.0 uses them all.
    """
    if "REC_PATH" not in cfg.DATASETS:
        cfg.DATASETS.REC_PATH = ""
    if "DROPOUT" not in cfg.MODEL.BACKBONE:
        cfg.MODEL.BACKBONE.DROPOUT = 0.0
    heads = cfg.MODEL.HEADS
    if "PFC" not in heads:
        heads.PFC = CN({"ENABLED": False})
    if "ENABLED" not in heads.PFC:
        heads.PFC.ENABLED = False
    if "SAMPLE_RATE" not in heads.PFC:
        heads.PFC.SAMPLE_RATE = 0.1
    return cfg


#: Upstream's name (``fastface.add_face_cfg``).
add_face_cfg = add_face_config
