"""VERI-Wild (Lou et al., CVPR 2019), with its Small / Medium / Large test sets."""

from __future__ import annotations

import os

from . import DATASET_REGISTRY
from .bases import DatasetFormatError, ImageDataset
from .parsing import MalformedEntryError, parse_entries, read_lines

__all__ = ["VeRiWild", "SmallVeRiWild", "MediumVeRiWild", "LargeVeRiWild"]


@DATASET_REGISTRY.register()
class VeRiWild(ImageDataset):
    """VERI-Wild: 30671 training vehicles (277797 images), 174 cameras; test sets of 3000 / 5000 /
    10000 vehicles (``VeRiWild`` itself tests on the 10000 one, as upstream).

    Cameras come from ``vehicle_info.txt`` (``<vid>/<image id>;<camera>;<time>;<model>;<type>;<colour>``,
    after one header line); the lists name images as ``<vid>/<image id>``.
    """

    dataset_name = "veriwild"
    folder_names = ("VERI-Wild", "VeRi-Wild", "veri-wild")
    test_size = 10000
    url = "https://github.com/PKU-IMRE/VERI-Wild (on request from the authors)"
    layout = """\
  {root}/VERI-Wild/
      images/00001/000001.jpg ...        (<vid>/<image id>.jpg)
      train_test_split/
          train_list.txt                  '<vid>/<image id>' a line, e.g. '00001/000001'
          vehicle_info.txt                header, then '<vid>/<image id>;<camera>;<time>;<model>;<type>;<colour>'
          test_3000.txt  test_3000_query.txt  test_5000.txt  test_5000_query.txt  test_10000.txt  test_10000_query.txt"""

    def __init__(self, root: str = "datasets", query_list: str = "", gallery_list: str = "", **kwargs):
        self.root = root
        self.dataset_dir = self.locate(root, self.folder_names, probe="train_test_split")
        split_dir = os.path.join(self.dataset_dir, "train_test_split")
        self.image_dir = os.path.join(self.dataset_dir, "images")
        self.train_list = os.path.join(split_dir, "train_list.txt")
        self.vehicle_info = os.path.join(split_dir, "vehicle_info.txt")
        if query_list and gallery_list:
            self.query_list, self.gallery_list = query_list, gallery_list
        else:
            self.query_list = os.path.join(split_dir, f"test_{self.test_size}_query.txt")
            self.gallery_list = os.path.join(split_dir, f"test_{self.test_size}.txt")
        self.check_before_run(
            [self.image_dir, self.train_list, self.query_list, self.gallery_list, self.vehicle_info],
            root=root,
        )
        self._cameras: dict[str, str] | None = None
        super().__init__(
            lambda: self._read(self.train_list, train=True),
            lambda: self._read(self.query_list, train=False),
            lambda: self._read(self.gallery_list, train=False),
            **kwargs,
        )

    def cameras(self) -> dict[str, str]:
        """Image id -> camera, from ``vehicle_info.txt`` (read once)."""
        if self._cameras is None:
            lines = read_lines(self.vehicle_info)[1:]  # a header line first

            def parse(line: str) -> tuple:
                fields = line.split(";")
                vid, _, image_id = fields[0].partition("/")
                if len(fields) < 2 or not image_id or not fields[1].strip().isdigit():
                    raise MalformedEntryError("")
                return (image_id, fields[1].strip())

            self._cameras = dict(
                parse_entries(
                    type(self).__name__,
                    self.vehicle_info,
                    lines,
                    parse,
                    "lines '<vid>/<image id>;<camera>;...'",
                )
            )
        return self._cameras

    def _read(self, list_file: str, train: bool) -> list:
        cameras = self.cameras()
        name = self.dataset_name

        def parse(line: str) -> tuple:
            vid, _, image_id = line.partition("/")
            image_id = os.path.splitext(image_id)[0]
            if not vid.isdigit() or not image_id:
                raise MalformedEntryError("")
            if image_id not in cameras:
                raise MalformedEntryError(f"image {image_id} is not in {os.path.basename(self.vehicle_info)}")
            path = os.path.join(self.image_dir, vid, f"{image_id}.jpg")
            camid = int(cameras[image_id])
            if train:
                return (path, f"{name}_{int(vid)}", f"{name}_{camid}")
            return (path, int(vid), camid)

        items = parse_entries(
            type(self).__name__, list_file, read_lines(list_file), parse, "lines '<vid>/<image id>'"
        )
        if not items:
            raise DatasetFormatError(f"{type(self).__name__}: no images listed in {list_file}")
        return items


@DATASET_REGISTRY.register()
class SmallVeRiWild(VeRiWild):
    """VERI-Wild's small test set: 3000 vehicles, 41861 images."""

    test_size = 3000

    def __init__(self, root: str = "datasets", **kwargs):
        kwargs.pop("query_list", None)
        kwargs.pop("gallery_list", None)
        super().__init__(root, **kwargs)


@DATASET_REGISTRY.register()
class MediumVeRiWild(SmallVeRiWild):
    """VERI-Wild's medium test set: 5000 vehicles, 69389 images."""

    test_size = 5000


@DATASET_REGISTRY.register()
class LargeVeRiWild(SmallVeRiWild):
    """VERI-Wild's large test set: 10000 vehicles, 138517 images."""

    test_size = 10000
