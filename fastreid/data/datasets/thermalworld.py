"""ThermalWorld, its RGB images (Kniaz et al., ECCVW 2018): one folder per identity; one camera.

Upstream FastReID's ``fastreid/data/datasets/thermalworld.py``; read by the shared parser of
:mod:`~fastreid.data.datasets.train_only_base` (labels are upstream's strings,
``"<dataset_name>_<field>"``)."""

from __future__ import annotations

from . import DATASET_REGISTRY
from .train_only_base import TrainOnlySet

__all__ = ["Thermalworld"]


@DATASET_REGISTRY.register()
class Thermalworld(TrainOnlySet):
    """ThermalWorld, its RGB images (Kniaz et al., ECCVW 2018): one folder per identity; one camera."""

    dataset_name = "thermalworld"
    folder_names = ("thermalworld_rgb",)
    url = "the authors of ThermalGAN (Kniaz et al., ECCV Workshops 2018), who released ThermalWorld"
    expected = "'<pid>/<image>.jpg'"
    layout = """\
  {root}/thermalworld_rgb/
      <pid>/   *.jpg"""

    tree = "per_identity"
