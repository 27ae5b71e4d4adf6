"""PKU VehicleID (Liu et al., CVPR 2016), with its Small / Medium / Large test lists."""

from __future__ import annotations

import os
import random

from . import DATASET_REGISTRY
from .bases import ImageDataset
from .parsing import MalformedEntryError, parse_entries, read_lines

__all__ = ["VehicleID", "SmallVehicleID", "MediumVehicleID", "LargeVehicleID"]


@DATASET_REGISTRY.register()
class VehicleID(ImageDataset):
    """VehicleID: 13164 training vehicles (113346 images); test lists of 800 / 1600 / 2400 vehicles.

    List lines are ``<image id> <vehicle id>``. As upstream: training cameras are the image ids
    (VehicleID has no camera labels, so every image is its own "camera"), and the test list is
    split by shuffling and giving one image of each vehicle to the gallery, the others to the
    query. Upstream shuffles with the unseeded global RNG; here the shuffle is seeded
    (``split_seed``, default 0) so the split is the same in every run and on every rank.
    """

    dataset_name = "vehicleid"
    folder_names = ("vehicleid", "VehicleID_V1.0")  # upstream's, the published archive's
    test_list_name = "test_list_13164.txt"
    url = "https://pkuml.org/resources/pku-vehicleid.html (on request from the authors)"
    layout = """\
  {root}/vehicleid/   (or {root}/VehicleID_V1.0/)
      image/              0000001.jpg ...
      train_test_split/
          train_list.txt        '<image id> <vehicle id>' a line, e.g. '0001536 0'
          test_list_800.txt  test_list_1600.txt  test_list_2400.txt  (test_list_13164.txt for VehicleID)"""

    def __init__(self, root: str = "datasets", test_list: str = "", split_seed: int = 0, **kwargs):
        self.root = root
        self.dataset_dir = self.locate(root, self.folder_names, probe="train_test_split")
        self.image_dir = os.path.join(self.dataset_dir, "image")
        self.train_list = os.path.join(self.dataset_dir, "train_test_split", "train_list.txt")
        self.test_list = test_list or os.path.join(self.dataset_dir, "train_test_split", self.test_list_name)
        self.check_before_run([self.image_dir, self.train_list, self.test_list], root=root)
        self.split_seed = split_seed
        query, gallery = self._split(self._read(self.test_list, train=False))
        super().__init__(lambda: self._read(self.train_list, train=True), query, gallery, **kwargs)

    def _read(self, list_file: str, train: bool) -> list:
        name = self.dataset_name

        def parse(line: str) -> tuple:
            parts = line.split()
            if len(parts) != 2 or not parts[0].isdigit():
                raise MalformedEntryError("")
            image_id, vid = parts[0], int(parts[1])
            path = os.path.join(self.image_dir, f"{image_id}.jpg")
            if train:
                return (path, f"{name}_{vid}", f"{name}_{int(image_id)}")
            return (path, vid, int(image_id))

        return parse_entries(
            type(self).__name__, list_file, read_lines(list_file), parse, "lines '<image id> <vehicle id>'"
        )

    def _split(self, items: list) -> tuple[list, list]:
        items = list(items)
        random.Random(self.split_seed).shuffle(items)
        seen, query, gallery = set(), [], []
        for item in items:
            if item[1] in seen:
                query.append(item)
            else:
                seen.add(item[1])
                gallery.append(item)
        return query, gallery


@DATASET_REGISTRY.register()
class SmallVehicleID(VehicleID):
    """VehicleID's small test set: 800 vehicles, 6493 images."""

    test_list_name = "test_list_800.txt"

    def __init__(self, root: str = "datasets", **kwargs):
        kwargs.pop("test_list", None)
        super().__init__(root, **kwargs)


@DATASET_REGISTRY.register()
class MediumVehicleID(SmallVehicleID):
    """VehicleID's medium test set: 1600 vehicles, 13377 images."""

    test_list_name = "test_list_1600.txt"


@DATASET_REGISTRY.register()
class LargeVehicleID(SmallVehicleID):
    """VehicleID's large test set: 2400 vehicles, 19777 images."""

    test_list_name = "test_list_2400.txt"
