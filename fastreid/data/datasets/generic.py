"""A dataset for your own data: Market-style folders or plain list files.

Put the data under ``$FASTREID_DATASETS/custom`` and use ``DATASETS.NAMES ("CustomReID",)``, or
register another folder name with :func:`register_folder_dataset`.
"""

from __future__ import annotations

import os

from . import DATASET_REGISTRY
from .bases import DatasetNotFoundError, ImageDataset
from .market_format import parse_market_folder
from .parsing import MalformedEntryError, parse_entries, read_lines

__all__ = ["CustomReID", "register_folder_dataset", "read_list_file"]

SPLITS = ("train", "query", "gallery")
FOLDER_NAMES = {
    "train": ("bounding_box_train", "train"),
    "query": ("query",),
    "gallery": ("bounding_box_test", "gallery"),
}

LAYOUT = """\
  either list files (one image a line: '<path relative to the folder> <pid> <camid>'):
      {folder}/train.txt  {folder}/query.txt  {folder}/gallery.txt
  or Market-style folders of images named '<pid>_c<camera>...jpg' (camera from 1):
      {folder}/bounding_box_train/ (or train/)  query/  bounding_box_test/ (or gallery/)"""


def read_list_file(list_path: str, base_dir: str, owner: str = "CustomReID") -> list[tuple]:
    """Items of a list file whose lines are ``<path> <pid> <camid>`` (ints; '#' starts a comment).

    Lines that do not parse are skipped with one warning naming them; a file with no valid line
    is a :class:`DatasetFormatError`.
    """

    def parse(line: str) -> tuple:
        line = line.split("#", 1)[0].strip()
        parts = line.rsplit(maxsplit=2)
        if len(parts) != 3:
            raise MalformedEntryError("")
        return (os.path.join(base_dir, parts[0]), int(parts[1]), int(parts[2]))

    entries = [(label, text) for label, text in read_lines(list_path) if text.split("#", 1)[0].strip()]
    return parse_entries(
        owner, list_path, entries, parse, "lines '<path> <pid> <camid>' (pid, camid integers)"
    )


@DATASET_REGISTRY.register()
class CustomReID(ImageDataset):
    """Your data under ``<root>/<dataset_dir>``: list files if present, else Market-style folders.

    Training ids and cameras get the ``<dataset_name>_`` prefix like the built-in datasets, so
    they can be mixed with them. Query/gallery pid -1 is junk (dropped).
    """

    dataset_dir = "custom"
    dataset_name = "custom"
    _junk_pids = (-1,)

    def __init__(self, root: str = "datasets", **kwargs):
        self.root = root
        folder = os.path.join(root, self.dataset_dir)
        layout = LAYOUT.format(folder=folder)
        if not os.path.isdir(folder):
            raise DatasetNotFoundError(self._missing_message(folder, root, layout))
        lists = {s: os.path.join(folder, f"{s}.txt") for s in SPLITS}
        if all(os.path.isfile(p) for p in lists.values()):
            loaders = {
                s: (lambda p=p: read_list_file(p, folder, type(self).__name__)) for s, p in lists.items()
            }
        else:
            loaders = {s: self._folder_loader(folder, s, layout) for s in SPLITS}
        prefix = self.dataset_name

        def train() -> list:
            return [(p, f"{prefix}_{pid}", f"{prefix}_{cam}") for p, pid, cam in loaders["train"]()]

        def test(split: str):
            return lambda: [item for item in loaders[split]() if item[1] != -1]

        super().__init__(train, test("query"), test("gallery"), **kwargs)

    def _folder_loader(self, folder: str, split: str, layout: str):
        candidates = [os.path.join(folder, n) for n in FOLDER_NAMES[split]]
        found = next((c for c in candidates if os.path.isdir(c)), None)
        if found is None:
            raise DatasetNotFoundError(self._missing_message(" or ".join(candidates), self.root, layout))
        return lambda: parse_market_folder(found, num_cams=10**6, drop_junk=False, owner=type(self).__name__)


def register_folder_dataset(name: str, dataset_dir: str) -> type:
    """Register ``name`` as a :class:`CustomReID` reading ``<root>/<dataset_dir>``."""
    cls = type(name, (CustomReID,), {"dataset_dir": dataset_dir, "dataset_name": name.lower()})
    DATASET_REGISTRY.register(cls)
    return cls
