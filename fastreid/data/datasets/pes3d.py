"""3DPeS (Baltieri et al., 2011), one folder per identity of ``.bmp`` images; one camera.

Upstream FastReID's ``fastreid/data/datasets/pes3d.py``; read by the shared parser of
:mod:`~fastreid.data.datasets.train_only_base` (labels are upstream's strings,
``"<dataset_name>_<field>"``)."""

from __future__ import annotations

from . import DATASET_REGISTRY
from .train_only_base import TrainOnlySet

__all__ = ["PeS3D"]


@DATASET_REGISTRY.register()
class PeS3D(TrainOnlySet):
    """3DPeS (Baltieri et al., 2011), one folder per identity of ``.bmp`` images; one camera."""

    dataset_name = "pes3d"
    folder_names = ("3DPeS",)
    url = "http://www.openvisor.org/3dpes.asp"
    expected = "'<pid>/<image>.bmp'"
    layout = """\
  {root}/3DPeS/
      <pid>/   *.bmp"""

    tree = "per_identity"
    extensions = (".bmp",)
