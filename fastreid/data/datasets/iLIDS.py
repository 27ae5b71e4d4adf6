"""i-LIDS person images, one folder per identity, ``<camera>_<...>.png``.

Upstream FastReID's ``fastreid/data/datasets/iLIDS.py``; read by the shared parser of
:mod:`~fastreid.data.datasets.train_only_base` (labels are upstream's strings,
``"<dataset_name>_<field>"``)."""

from __future__ import annotations

from . import DATASET_REGISTRY
from .train_only_base import Field, TrainOnlySet

__all__ = ["iLIDS"]


@DATASET_REGISTRY.register()
class iLIDS(TrainOnlySet):  # noqa: N801  (upstream's registry name)
    """i-LIDS person images, one folder per identity, ``<camera>_<...>.png``."""

    dataset_name = "ilids"
    folder_names = ("iLIDS",)
    url = "http://www.eecs.qmul.ac.uk/~jason/data/i-LIDS_Pedestrian.tgz (arranged one folder per person)"
    expected = "'<pid>/<camera>_<...>.png'"
    layout = """\
  {root}/iLIDS/
      <pid>/   cam1_0001.png ...   (folder name: pid; file name up to the first '_': camera)"""

    tree = "per_identity"
    extensions = (".png",)
    camera = Field(sep="_", first=True)
