"""The project's config keys, added before ``merge_from_file``."""

from fastreid.config import CfgNode as CN


def add_retri_config(cfg):
    cfg.TEST.RECALLS = [1, 2, 4]
    cfg.TEST.RETRI = CN({"COSINE": True})
