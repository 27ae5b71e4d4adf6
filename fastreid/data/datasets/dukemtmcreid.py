"""DukeMTMC-reID (Ristani et al., ECCVW 2016; Zheng et al., ICCV 2017)."""

from __future__ import annotations

import os

from . import DATASET_REGISTRY
from .bases import ImageDataset
from .market_format import parse_market_folder

__all__ = ["DukeMTMC"]


@DATASET_REGISTRY.register()
class DukeMTMC(ImageDataset):
    """DukeMTMC-reID: 1404 identities, 8 cameras; 16522 train, 2228 query, 17661 gallery images."""

    dataset_dir = "DukeMTMC-reID"
    dataset_name = "dukemtmc"
    folder_names = ("DukeMTMC-reID", "dukemtmc-reid/DukeMTMC-reID")  # upstream's, torchreid's
    url = "https://github.com/layumi/DukeMTMC-reID_evaluation (DukeMTMC-reID.zip; withdrawn by Duke in 2019)"
    layout = """\
  {root}/DukeMTMC-reID/   (or {root}/dukemtmc-reid/DukeMTMC-reID/)
      bounding_box_train/   0001_c2_f0046182.jpg ...  (pid_camera_frame, cameras 1-8)
      bounding_box_test/
      query/"""

    def __init__(self, root: str = "datasets", **kwargs):
        self.root = root
        self.dataset_dir = self.locate(root, self.folder_names, probe="bounding_box_train")
        self.train_dir = os.path.join(self.dataset_dir, "bounding_box_train")
        self.query_dir = os.path.join(self.dataset_dir, "query")
        self.gallery_dir = os.path.join(self.dataset_dir, "bounding_box_test")
        self.check_before_run([self.train_dir, self.query_dir, self.gallery_dir], root=root)
        owner = type(self).__name__
        super().__init__(
            lambda: parse_market_folder(self.train_dir, 8, prefix=self.dataset_name, owner=owner),
            lambda: parse_market_folder(self.query_dir, 8, owner=owner),
            lambda: parse_market_folder(self.gallery_dir, 8, owner=owner),
            **kwargs,
        )
