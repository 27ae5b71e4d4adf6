"""MSMT17 (Wei et al., CVPR 2018), read from its list files."""

from __future__ import annotations

import os

from . import DATASET_REGISTRY
from .bases import DatasetNotFoundError, ImageDataset

__all__ = ["MSMT17"]

# Version folder -> (train folder, test folder); V2 has blurred faces and other folder names.
VERSIONS = {
    "MSMT17_V1": ("train", "test"),
    "MSMT17_V2": ("mask_train_v2", "mask_test_v2"),
    "MSMT17": ("train", "test"),
}

LAYOUT = """\
  {root}/MSMT17_V1/   (or MSMT17_V2/ with mask_train_v2/ and mask_test_v2/)
      train/  test/
      list_train.txt  list_val.txt  list_query.txt  list_gallery.txt
  each list line: '<relative image path> <pid>', e.g. '0000/0000_000_01_0303morning_0015_0.jpg 0'"""


@DATASET_REGISTRY.register()
class MSMT17(ImageDataset):
    """MSMT17: 4101 identities, 15 cameras; 32621 train, 11659 query, 82161 gallery images.

    Query and gallery pids are shifted by the number of training ids (as upstream does) so they
    never collide with training ids. ``combineall`` also adds ``list_val.txt`` to training.
    """

    dataset_name = "msmt17"

    def __init__(self, root: str = "datasets", **kwargs):
        self.root = root
        main = next((v for v in VERSIONS if os.path.isdir(os.path.join(root, v))), None)
        if main is None:
            raise DatasetNotFoundError(self._missing_message(
                " or ".join(os.path.join(root, v) for v in VERSIONS), root, LAYOUT.format(root=root)))
        train_name, test_name = VERSIONS[main]
        base = os.path.join(root, main)
        self.train_dir = os.path.join(base, train_name)
        self.test_dir = os.path.join(base, test_name)
        lists = {k: os.path.join(base, f"list_{k}.txt") for k in ("train", "val", "query", "gallery")}
        self.check_before_run([self.train_dir, self.test_dir, *lists.values()], root=root,
                              layout=LAYOUT.format(root=root))

        train = self._read_list(self.train_dir, lists["train"], train=True)
        num_train_pids = self.get_num_pids(train)
        query = self._read_list(self.test_dir, lists["query"], pid_offset=num_train_pids)
        gallery = self._read_list(self.test_dir, lists["gallery"], pid_offset=num_train_pids)
        if kwargs.get("combineall"):
            train += self._read_list(self.train_dir, lists["val"], train=True)
        super().__init__(train, query, gallery, **kwargs)

    def _read_list(self, folder: str, list_path: str, train: bool = False, pid_offset: int = 0) -> list:
        data = []
        with open(list_path, encoding="utf-8") as f:
            for line_no, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                parts = line.split()
                try:
                    rel_path, pid = parts[0], int(parts[1])
                    camid = int(os.path.basename(rel_path).split("_")[2]) - 1
                except (IndexError, ValueError):
                    raise ValueError(
                        f"{list_path}:{line_no}: expected '<path> <pid>' with a file name like "
                        f"'0000_000_01_0303morning_0015_0.jpg', got {line!r}"
                    ) from None
                path = os.path.join(folder, rel_path)
                if train:
                    data.append((path, f"{self.dataset_name}_{pid}", f"{self.dataset_name}_{camid}"))
                else:
                    data.append((path, pid + pid_offset, camid))
        return data
