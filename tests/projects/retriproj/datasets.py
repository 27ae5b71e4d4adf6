"""The tiny pedestrians as a re-ID data set (train / query / gallery), in DATASET_REGISTRY."""

import os

import tiny_people

from fastreid.data.datasets import DATASET_REGISTRY
from fastreid.data.datasets.bases import ImageDataset


@DATASET_REGISTRY.register()
class TinyPeople(ImageDataset):
    dataset_name = "tinypeople"

    def __init__(self, root="datasets", **kwargs):
        folder = os.path.join(root, tiny_people.FOLDER)
        splits = [os.path.join(folder, s) for s in ("train", "query", "gallery")]
        self.check_before_run(splits, root=root)
        train = self._items(splits[0], is_train=True)
        super().__init__(train, self._items(splits[1]), self._items(splits[2]), **kwargs)

    def _items(self, split_dir, is_train=False):
        items = []
        for name in sorted(os.listdir(split_dir)):
            pid, cam = tiny_people.parse_name(name)
            if is_train:  # upstream's convention: training labels carry the data set's name
                pid, cam = f"{self.dataset_name}_{pid}", f"{self.dataset_name}_{cam}"
            items.append((os.path.join(split_dir, name), pid, cam))
        return items
