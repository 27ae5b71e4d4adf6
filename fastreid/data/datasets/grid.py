"""QMUL GRID (Loy et al., 2009): ``<pid>_<camera>_....jpeg``; pid 0000 are the unpaired gallery persons

Upstream FastReID's ``fastreid/data/datasets/grid.py``; read by the shared parser of
:mod:`~fastreid.data.datasets.train_only_base` (labels are upstream's strings,
``"<dataset_name>_<field>"``)."""

from __future__ import annotations

import os

from . import DATASET_REGISTRY
from .bases import DatasetNotFoundError, TrainOnlyDataset
from .parsing import MalformedEntryError
from .train_only_base import Field, TrainOnlySet

__all__ = ["GRID"]


@DATASET_REGISTRY.register()
class GRID(TrainOnlySet):
    """QMUL GRID (Loy et al., 2009): ``<pid>_<camera>_....jpeg``; pid 0000 are the unpaired gallery persons
    (kept, as upstream does)."""

    dataset_name = "grid"
    url = "http://personal.ie.cuhk.edu.hk/~ccloy/downloads_qmul_underground_reid.html (underground_reid.zip)"
    expected = "names '<pid>_<camera>_<...>.jpeg' such as '0001_1_25004_107_32_130.jpeg'"
    layout = """\
  {root}/underground_reid/   (or {root}/grid/underground_reid/)
      images/     0001_1_25004_107_32_130.jpeg ...   (upstream: probe and gallery images together)
  or, as published (torchreid's layout):
      probe/  gallery/"""
    extensions = (".jpeg",)
    pid = Field(sep="_", index=0)
    camera = Field(sep="_", index=1)
    # (folder relative to root, sub-folders holding the images)
    _layouts = (
        ("underground_reid", ("images",)),
        ("grid/underground_reid", ("images",)),
        ("underground_reid", ("probe", "gallery")),
        ("grid/underground_reid", ("probe", "gallery")),
    )

    def __init__(self, root: str = "datasets", **kwargs):
        self.root = root
        for base, subs in self._layouts:
            if all(os.path.isdir(os.path.join(root, base, s)) for s in subs):
                self.data_dir, self.image_dirs = os.path.join(root, base), subs
                break
        else:
            looked = " or ".join(os.path.join(root, b, "+".join(s)) for b, s in self._layouts)
            raise DatasetNotFoundError(self._missing_message(looked, root, self.layout))
        TrainOnlyDataset.__init__(self, lambda: self.parse(self.data_dir), **kwargs)

    def item(self, path: str) -> tuple:
        item = super().item(path)
        if not self._read(self.pid, path).isdigit():
            raise MalformedEntryError("")
        return item
