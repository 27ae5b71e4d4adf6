"""Shinpuhkan 2014 (Kawanishi et al., 2014): ``<pid>_<x>_<camera>_<...>.jpg`` anywhere under the folder.

Upstream FastReID's ``fastreid/data/datasets/shinpuhkan.py``; read by the shared parser of
:mod:`~fastreid.data.datasets.train_only_base` (labels are upstream's strings,
``"<dataset_name>_<field>"``)."""

from __future__ import annotations

from . import DATASET_REGISTRY
from .train_only_base import Field, TrainOnlySet

__all__ = ["Shinpuhkan"]


@DATASET_REGISTRY.register()
class Shinpuhkan(TrainOnlySet):
    """Shinpuhkan 2014 (Kawanishi et al., 2014): ``<pid>_<x>_<camera>_<...>.jpg`` anywhere under the folder."""

    dataset_name = "shinpuhkan"
    folder_names = ("shinpuhkan",)
    url = "http://www.mm.media.kyoto-u.ac.jp/en/datasets/shinpuhkan/"
    expected = "names '<pid>_<x>_<camera>_<...>.jpg'"
    layout = """\
  {root}/shinpuhkan/
      .../0001_001_01_...jpg   (any depth; fields: pid, _, camera)"""

    tree = "recursive"
    pid = Field(sep="_", index=0)
    camera = Field(sep="_", index=2)
