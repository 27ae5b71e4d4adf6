"""PRAI-1581 aerial images (Zhang et al., 2019), ``<pid>_<camera>_<...>.jpg``.

Upstream FastReID's ``fastreid/data/datasets/prai.py``; read by the shared parser of
:mod:`~fastreid.data.datasets.train_only_base` (labels are upstream's strings,
``"<dataset_name>_<field>"``)."""

from __future__ import annotations

from . import DATASET_REGISTRY
from .train_only_base import NameFieldsSet

__all__ = ["PRAI"]


@DATASET_REGISTRY.register()
class PRAI(NameFieldsSet):
    """PRAI-1581 aerial images (Zhang et al., 2019), ``<pid>_<camera>_<...>.jpg``."""

    dataset_name = "prai"
    folder_names = ("PRAI-1581",)
    image_dirs = ("images",)
    probe = "images"
    url = "the authors of PRAI-1581 (Zhang et al., 2019, aerial person re-id)"
    expected = "names '<pid>_<camera>_<...>.jpg'"
    layout = """\
  {root}/PRAI-1581/
      images/   00000001_0001_00000001.jpg ...   (pid_camera_...)"""
