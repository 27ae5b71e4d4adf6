"""The project's config keys, added before ``merge_from_file``."""

from fastreid.config import CfgNode as CN


def add_face_cfg(cfg):
    cfg.MODEL.HEADS.PFC = CN({"ENABLED": True})
    cfg.MODEL.HEADS.PFC.SCALE = 16.0
