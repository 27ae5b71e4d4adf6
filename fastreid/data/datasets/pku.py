"""PKU-Reid (Ma et al., 2016), ``<pid>_<camera>_<...>.png`` at 128x48.

Upstream FastReID's ``fastreid/data/datasets/pku.py``; read by the shared parser of
:mod:`~fastreid.data.datasets.train_only_base` (labels are upstream's strings,
``"<dataset_name>_<field>"``)."""

from __future__ import annotations

from . import DATASET_REGISTRY
from .train_only_base import NameFieldsSet

__all__ = ["PKU"]


@DATASET_REGISTRY.register()
class PKU(NameFieldsSet):
    """PKU-Reid (Ma et al., 2016), ``<pid>_<camera>_<...>.png`` at 128x48."""

    dataset_name = "pku"
    folder_names = ("PKUv1a_128x48",)
    url = "https://github.com/charliememory/PKU-Reid-Dataset"
    extensions = (".png",)
    expected = "names '<pid>_<camera>_<...>.png'"
    layout = """\
  {root}/PKUv1a_128x48/
      0001_0_0001.png ...   (pid_camera_...)"""
