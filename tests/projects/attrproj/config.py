"""The project's config keys, added before ``merge_from_file`` (as upstream's projects do)."""

from fastreid.config import CfgNode as CN


def add_attr_config(cfg):
    cfg.MODEL.LOSSES.BCE = CN({"WEIGHT_ENABLED": True})
    cfg.MODEL.LOSSES.BCE.SCALE = 1.0
    cfg.TEST.THRES = 0.5
