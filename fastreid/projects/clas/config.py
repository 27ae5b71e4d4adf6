"""The config of image classification (upstream FastClas adds no keys of its own)."""

from __future__ import annotations

from typing import Any

__all__ = ["add_clas_config"]


def add_clas_config(cfg: Any) -> Any:
    """Returns ``cfg`` unchanged: upstream's FastClas trains with the standard keys
    (``MODEL.HEADS.NAME ClasHead``, ``INPUT.CROP.*``, ``MODEL.LOSSES.CE.*``) and has no
    ``add_*_config``. This is the function :data:`fastreid.config.families.FAMILIES` names for the
    family's names: what a config naming ``ClasHead`` or ``Hymenoptera`` needs is the import of
    :mod:`fastreid.projects.clas`, which registers the data set and the trainer."""
    return cfg
