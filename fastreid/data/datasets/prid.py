"""PRID 2011 (Hirzer et al., SCIA 2011) as upstream reads it: ``slim_train/<x>_<pid>/<camera>_<...>.png``.

Upstream FastReID's ``fastreid/data/datasets/prid.py``; read by the shared parser of
:mod:`~fastreid.data.datasets.train_only_base` (labels are upstream's strings,
``"<dataset_name>_<field>"``)."""

from __future__ import annotations

from . import DATASET_REGISTRY
from .train_only_base import Field, TrainOnlySet

__all__ = ["PRID"]


@DATASET_REGISTRY.register()
class PRID(TrainOnlySet):
    """PRID 2011 (Hirzer et al., SCIA 2011) as upstream reads it: ``slim_train/<x>_<pid>/<camera>_<...>.png``."""

    dataset_name = "prid"
    folder_names = (
        "prid_2011/slim_train",
        "prid2011/prid_2011/slim_train",
    )  # upstream's, under torchreid's folder
    url = "https://www.tugraz.at/institute/icg/research/team-bischof/lrs/downloads/PRID11/"
    expected = "'<name>_<pid>/<camera>_<...>.png'"
    layout = """\
  {root}/prid_2011/
      slim_train/
          person_0001/   a_0001.png ...   (folder: <x>_<pid>; file: <camera>_<...>)"""

    tree = "subfolders"
    extensions = (".png",)
    pid = Field(level=1, sep="_", index=1)
    camera = Field(sep="_", index=0)
