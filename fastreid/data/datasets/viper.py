"""VIPeR (Gray et al., 2007): ``cam_a/`` and ``cam_b/`` of ``<pid>_<angle>.bmp``.

Upstream FastReID's ``fastreid/data/datasets/viper.py``; read by the shared parser of
:mod:`~fastreid.data.datasets.train_only_base` (labels are upstream's strings,
``"<dataset_name>_<field>"``)."""

from __future__ import annotations

from . import DATASET_REGISTRY
from .train_only_base import Field, TrainOnlySet

__all__ = ["VIPeR"]


@DATASET_REGISTRY.register()
class VIPeR(TrainOnlySet):
    """VIPeR (Gray et al., 2007): ``cam_a/`` and ``cam_b/`` of ``<pid>_<angle>.bmp``."""

    dataset_name = "viper"
    folder_names = ("VIPeR", "viper/VIPeR")  # upstream's, torchreid's
    url = "https://vision.soe.ucsc.edu/node/178 (VIPeR.v1.0.zip)"
    expected = "names '<pid>_<angle>.bmp' such as '000_45.bmp'"
    layout = """\
  {root}/VIPeR/   (or {root}/viper/VIPeR/)
      cam_a/   000_45.bmp ...   (pid_angle)
      cam_b/"""

    image_dirs = ("cam_a", "cam_b")
    extensions = (".bmp",)
    pid = Field(sep="_", first=True)
    camera = Field(level=1)
