"""MSMT17 (Wei et al., CVPR 2018), read from its list files."""

from __future__ import annotations

import os

from . import DATASET_REGISTRY
from .bases import ImageDataset
from .parsing import MalformedEntryError, parse_entries, read_lines

__all__ = ["MSMT17"]

# Version folder -> (train folder, test folder); V2 has blurred faces and other folder names.
VERSIONS = {
    "MSMT17_V1": ("train", "test"),
    "MSMT17_V2": ("mask_train_v2", "mask_test_v2"),
}
PARENTS = ("", "msmt17")  # upstream: <root>/MSMT17_V*; torchreid: <root>/msmt17/MSMT17_V*


@DATASET_REGISTRY.register()
class MSMT17(ImageDataset):
    """MSMT17: 4101 identities, 15 cameras; 32621 train, 11659 query, 82161 gallery images.

    Query and gallery pids are shifted by the number of training ids (as upstream does) so they
    never collide with training ids. ``combineall`` also adds ``list_val.txt`` to training.
    """

    dataset_name = "msmt17"
    url = "http://www.pkuvmc.com/publications/msmt17.html (on request from the authors)"
    layout = """\
  {root}/MSMT17_V1/   (or MSMT17_V2/ with mask_train_v2/ and mask_test_v2/; or under {root}/msmt17/)
      train/0000/0000_000_01_0303morning_0015_0.jpg ...   (pid_index_camera_date+time_frame_?)
      test/
      list_train.txt  list_val.txt  list_query.txt  list_gallery.txt
  each list line: '<path relative to train/ or test/> <pid>', e.g. '0000/0000_000_01_0303morning_0015_0.jpg 0'"""

    def __init__(self, root: str = "datasets", **kwargs):
        self.root = root
        candidates = [os.path.join(parent, v) if parent else v for parent in PARENTS for v in VERSIONS]
        base = self.locate(root, candidates)
        train_name, test_name = VERSIONS[os.path.basename(base)]
        self.train_dir = os.path.join(base, train_name)
        self.test_dir = os.path.join(base, test_name)
        lists = {k: os.path.join(base, f"list_{k}.txt") for k in ("train", "val", "query", "gallery")}
        self.check_before_run([self.train_dir, self.test_dir, *lists.values()], root=root)

        train = self._read_list(self.train_dir, lists["train"], train=True)
        num_train_pids = self.get_num_pids(train)
        query = self._read_list(self.test_dir, lists["query"], pid_offset=num_train_pids)
        gallery = self._read_list(self.test_dir, lists["gallery"], pid_offset=num_train_pids)
        if kwargs.get("combineall"):
            train += self._read_list(self.train_dir, lists["val"], train=True)
        super().__init__(train, query, gallery, **kwargs)

    def _read_list(self, folder: str, list_path: str, train: bool = False, pid_offset: int = 0) -> list:
        def parse(line: str) -> tuple:
            parts = line.split()
            if len(parts) != 2:
                raise MalformedEntryError("")
            rel_path, pid = parts[0], int(parts[1])
            camid = int(os.path.basename(rel_path).split("_")[2]) - 1
            if not 0 <= camid < 15:
                raise MalformedEntryError(f"camera {camid + 1} outside 1..15")
            path = os.path.join(folder, rel_path)
            if train:
                return (path, f"{self.dataset_name}_{pid}", f"{self.dataset_name}_{camid}")
            return (path, pid + pid_offset, camid)

        return parse_entries(
            type(self).__name__,
            list_path,
            read_lines(list_path),
            parse,
            "lines '<pid folder>/<pid>_<index>_<camera>_<...>.jpg <pid>'",
        )
