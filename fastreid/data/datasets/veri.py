"""VeRi-776 (Liu et al., ECCV 2016 / TMM 2018), vehicle re-ID."""

from __future__ import annotations

import os

from . import DATASET_REGISTRY
from .bases import ImageDataset
from .market_format import parse_market_folder

__all__ = ["VeRi"]


@DATASET_REGISTRY.register()
class VeRi(ImageDataset):
    """VeRi: 776 vehicles, 20 cameras; 37778 train, 1678 query, 11579 gallery images.

    File names ``<vid>_c<camera>_<frame>_<n>.jpg`` (``0001_c001_00016450_0.jpg``), cameras
    c001..c020 (0-based ids), vehicle ids 0..776. Training ids and cameras become
    ``veri_<n>`` strings as upstream.
    """

    dataset_name = "veri"
    folder_names = ("veri", "VeRi")  # upstream's, the name the published archive extracts to
    synthetic_available = True
    synthetic_command = "python -m fastreid.data.synthetic.vehicles --root {root}"
    url = "https://vehiclereid.github.io/VeRi/ (on request from the authors)"
    layout = """\
  {root}/veri/   (or {root}/VeRi/)
      image_train/   0001_c001_00016450_0.jpg ...   (vehicle_camera_frame_n, cameras c001-c020)
      image_query/
      image_test/    the gallery"""

    def __init__(self, root: str = "datasets", **kwargs):
        self.root = root
        self.dataset_dir = self.locate(root, self.folder_names, probe="image_train")
        self.train_dir = os.path.join(self.dataset_dir, "image_train")
        self.query_dir = os.path.join(self.dataset_dir, "image_query")
        self.gallery_dir = os.path.join(self.dataset_dir, "image_test")
        self.check_before_run([self.train_dir, self.query_dir, self.gallery_dir], root=root)
        super().__init__(
            lambda: self._parse(self.train_dir, prefix=self.dataset_name),
            lambda: self._parse(self.query_dir),
            lambda: self._parse(self.gallery_dir),
            **kwargs,
        )

    def _parse(self, folder: str, prefix: str | None = None) -> list:
        return parse_market_folder(
            folder, num_cams=20, prefix=prefix, max_pid=776, owner=type(self).__name__, extensions=(".jpg",)
        )
