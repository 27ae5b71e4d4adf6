"""SenseReID (Zhao et al., CVPR 2017): ``test_gallery/`` and ``test_prob/`` of ``<pid>_<camera>.jpg``

Upstream FastReID's ``fastreid/data/datasets/sensereid.py``; read by the shared parser of
:mod:`~fastreid.data.datasets.train_only_base` (labels are upstream's strings,
``"<dataset_name>_<field>"``)."""

from __future__ import annotations

import os

from . import DATASET_REGISTRY
from .bases import DatasetNotFoundError
from .parsing import MalformedEntryError
from .train_only_base import TrainOnlySet, field

__all__ = ["SenseReID"]


@DATASET_REGISTRY.register()
class SenseReID(TrainOnlySet):
    """SenseReID (Zhao et al., CVPR 2017): ``test_gallery/`` and ``test_prob/`` of ``<pid>_<camera>.jpg``
    (upstream uses every image for training)."""

    dataset_name = "senseid"  # upstream's spelling
    folder_names = ("SenseReID", "sensereid/SenseReID")  # upstream's, torchreid's
    url = "the authors of Spindle Net (Zhao et al., CVPR 2017), who released SenseReID"
    expected = "names '<pid>_<camera>.jpg' such as '0000001_01.jpg'"
    layout = """\
  {root}/SenseReID/   (or {root}/sensereid/SenseReID/)
      test_gallery/   0000001_01.jpg ...   (pid_camera)
      test_prob/      (test_probe/ accepted too)"""

    def image_folders(self, folder: str) -> list[str]:
        dirs = [os.path.join(folder, "test_gallery")]
        probe = [
            os.path.join(folder, n)
            for n in ("test_prob", "test_probe")
            if os.path.isdir(os.path.join(folder, n))
        ]
        dirs += probe[:1]
        missing = [d for d in dirs if not os.path.isdir(d)] + (
            [] if probe else [os.path.join(folder, "test_prob")]
        )
        if missing:
            raise DatasetNotFoundError(self._missing_message(missing[0], self.root, self.layout))
        return dirs

    def where(self, folder: str) -> str:
        return " + ".join(self.image_folders(folder))

    def item(self, path: str) -> tuple:
        name = os.path.basename(path)
        camera = field(name, "_", 1).split(".")[0]
        if not camera:
            raise MalformedEntryError("")
        return (path, self.label(field(name, "_", 0)), self.label(camera))
