"""Labeled Pedestrian in the Wild (Song et al., AAAI 2018): ``scen<k>/<camera>/<pid>/*.jpg``;

Upstream FastReID's ``fastreid/data/datasets/lpw.py``; read by the shared parser of
:mod:`~fastreid.data.datasets.train_only_base` (labels are upstream's strings,
``"<dataset_name>_<field>"``)."""

from __future__ import annotations

from . import DATASET_REGISTRY
from .train_only_base import Field, TrainOnlySet

__all__ = ["LPW"]


@DATASET_REGISTRY.register()
class LPW(TrainOnlySet):
    """Labeled Pedestrian in the Wild (Song et al., AAAI 2018): ``scen<k>/<camera>/<pid>/*.jpg``;
    identities are per scene (``lpw_scen1-<pid>``)."""

    dataset_name = "lpw"
    folder_names = ("pep_256x128/data_slim",)
    url = "the authors of LPW (Song et al., AAAI 2018, region-based quality estimation)"
    expected = "'scen<k>/<camera>/<pid>/<image>.jpg'"
    layout = """\
  {root}/pep_256x128/data_slim/
      scen1/  scen2/  scen3/
          view1/ ...          (camera)
              1/ 2/ ...       (pid within the scene)
                  *.jpg"""

    image_dirs = ("scen1", "scen2", "scen3")
    optional_dirs = True
    tree = "camera_identity"
    camera = Field(level=2)

    def item(self, path: str) -> tuple:
        scene, pid = Field(level=3)(path), Field(level=1)(path)
        return (path, self.label(f"{scene}-{pid}"), self.label(self._read(self.camera, path)))
