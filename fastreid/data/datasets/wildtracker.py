"""Persons cropped from WILDTRACK (Chavdarova et al., CVPR 2018): ``crop/<pid>/<camera>_<...>.png``.

Upstream FastReID's ``fastreid/data/datasets/wildtracker.py``; read by the shared parser of
:mod:`~fastreid.data.datasets.train_only_base` (labels are upstream's strings,
``"<dataset_name>_<field>"``)."""

from __future__ import annotations

from . import DATASET_REGISTRY
from .train_only_base import Field, TrainOnlySet

__all__ = ["WildTrackCrop"]


@DATASET_REGISTRY.register()
class WildTrackCrop(TrainOnlySet):
    """Persons cropped from WILDTRACK (Chavdarova et al., CVPR 2018): ``crop/<pid>/<camera>_<...>.png``."""

    dataset_name = "wildtrack"
    folder_names = ("Wildtrack_crop_dataset/crop",)
    url = "https://www.epfl.ch/labs/cvlab/data/data-wildtrack/ (crop the annotated boxes into crop/<pid>/)"
    expected = "'<pid>/<camera>_<...>.png'"
    layout = """\
  {root}/Wildtrack_crop_dataset/
      crop/
          <pid>/   C1_00000000.png ...   (camera_frame)"""

    tree = "per_identity"
    extensions = (".png",)
    camera = Field(sep="_", first=True)
