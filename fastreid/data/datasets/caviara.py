"""CAVIAR4REID (Cheng et al., BMVC 2011): ``PPPPNNN.jpg``, pid = the first 4 characters; one camera.

Upstream FastReID's ``fastreid/data/datasets/caviara.py``; read by the shared parser of
:mod:`~fastreid.data.datasets.train_only_base` (labels are upstream's strings,
``"<dataset_name>_<field>"``)."""

from __future__ import annotations

import os

from . import DATASET_REGISTRY
from .parsing import MalformedEntryError
from .train_only_base import TrainOnlySet

__all__ = ["CAVIARa"]


@DATASET_REGISTRY.register()
class CAVIARa(TrainOnlySet):
    """CAVIAR4REID (Cheng et al., BMVC 2011): ``PPPPNNN.jpg``, pid = the first 4 characters; one camera."""

    dataset_name = "caviara"
    folder_names = ("CAVIARa",)
    url = "http://www.lorisbazzani.info/caviar4reid.html"
    expected = "names '<4-digit pid><index>.jpg' such as '0001001.jpg'"
    layout = """\
  {root}/CAVIARa/
      0001001.jpg 0001002.jpg ...   (first 4 digits: pid)"""

    def item(self, path: str) -> tuple:
        pid = os.path.basename(path)[:4]
        if not pid.isdigit():
            raise MalformedEntryError("")
        return (path, self.label(pid), self.label("cam0"))
