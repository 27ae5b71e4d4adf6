"""SYSU-MM01 (Wu et al., ICCV 2017), the RGB cameras 1, 2, 4 and 5: ``cam<k>/<pid>/*.jpg``.

Upstream FastReID's ``fastreid/data/datasets/sysu_mm.py``; read by the shared parser of
:mod:`~fastreid.data.datasets.train_only_base` (labels are upstream's strings,
``"<dataset_name>_<field>"``)."""

from __future__ import annotations

from . import DATASET_REGISTRY
from .train_only_base import Field, TrainOnlySet

__all__ = ["SYSU_mm"]


@DATASET_REGISTRY.register()
class SYSU_mm(TrainOnlySet):  # noqa: N801  (upstream's registry name)
    """SYSU-MM01 (Wu et al., ICCV 2017), the RGB cameras 1, 2, 4 and 5: ``cam<k>/<pid>/*.jpg``."""

    dataset_name = "sysumm01"
    folder_names = ("SYSU-MM01",)
    url = "https://github.com/wuancong/SYSU-MM01"
    expected = "'cam<k>/<pid>/<image>.jpg'"
    layout = """\
  {root}/SYSU-MM01/
      cam1/  cam2/  cam4/  cam5/     (the RGB cameras; cam3/ and cam6/ are infrared, unused)
          0001/   0001.jpg ..."""

    image_dirs = ("cam1", "cam2", "cam4", "cam5")
    optional_dirs = True
    tree = "per_identity"
    camera = Field(level=2)
