"""DukeMTMC-reID (Ristani et al., ECCVW 2016; Zheng et al., ICCV 2017)."""

from __future__ import annotations

import os

from . import DATASET_REGISTRY
from .bases import ImageDataset
from .market_format import parse_market_folder

__all__ = ["DukeMTMC"]

LAYOUT = """\
  {root}/DukeMTMC-reID/
      bounding_box_train/   0001_c2_f0046182.jpg ...
      bounding_box_test/
      query/"""


@DATASET_REGISTRY.register()
class DukeMTMC(ImageDataset):
    """DukeMTMC-reID: 1404 identities, 8 cameras; 16522 train, 2228 query, 17661 gallery images."""

    dataset_dir = "DukeMTMC-reID"
    dataset_name = "dukemtmc"

    def __init__(self, root: str = "datasets", **kwargs):
        self.root = root
        self.dataset_dir = os.path.join(root, type(self).dataset_dir)
        self.train_dir = os.path.join(self.dataset_dir, "bounding_box_train")
        self.query_dir = os.path.join(self.dataset_dir, "query")
        self.gallery_dir = os.path.join(self.dataset_dir, "bounding_box_test")
        self.check_before_run([self.dataset_dir, self.train_dir, self.query_dir, self.gallery_dir],
                              root=root, layout=LAYOUT.format(root=root))
        super().__init__(
            lambda: parse_market_folder(self.train_dir, 8, prefix=self.dataset_name),
            lambda: parse_market_folder(self.query_dir, 8),
            lambda: parse_market_folder(self.gallery_dir, 8),
            **kwargs,
        )
