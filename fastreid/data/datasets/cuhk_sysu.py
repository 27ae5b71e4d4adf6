"""CUHK-SYSU person search (Xiao et al., CVPR 2017), cropped persons ``p<pid>_s<n>.jpg``; one camera.

Upstream FastReID's ``fastreid/data/datasets/cuhk_sysu.py``; read by the shared parser of
:mod:`~fastreid.data.datasets.train_only_base` (labels are upstream's strings,
``"<dataset_name>_<field>"``)."""

from __future__ import annotations

import os
import re

from . import DATASET_REGISTRY
from .parsing import MalformedEntryError
from .train_only_base import TrainOnlySet

__all__ = ["cuhkSYSU"]


@DATASET_REGISTRY.register()
class cuhkSYSU(TrainOnlySet):  # noqa: N801  (upstream's registry name)
    """CUHK-SYSU person search (Xiao et al., CVPR 2017), cropped persons ``p<pid>_s<n>.jpg``; one camera."""

    dataset_name = "cuhksysu"
    folder_names = ("cuhk_sysu/cropped_images", "cuhksysu/cropped_images")  # upstream's, torchreid's
    url = (
        "http://www.ee.cuhk.edu.hk/~xgwang/PS/dataset.html (crop the annotated persons into cropped_images/)"
    )
    expected = "names 'p<pid>_s<image>.jpg' such as 'p1234_s5678.jpg'"
    layout = """\
  {root}/cuhk_sysu/   (or {root}/cuhksysu/)
      cropped_images/   p1234_s5678.jpg ...   (p<pid>_s<scene image>)"""
    _pattern = re.compile(r"p(-?\d+)_s(\d)")

    def item(self, path: str) -> tuple:
        match = self._pattern.search(os.path.basename(path))
        if match is None:
            raise MalformedEntryError("")
        return (path, self.label(str(int(match.group(1)))), self.label("0"))
