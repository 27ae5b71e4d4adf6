"""Verification pairs of the tiny pedestrians' test images, in DATASET_REGISTRY."""

import itertools
import os

import tiny_people
from torch.utils.data import Dataset

from fastreid.data.data_utils import read_image
from fastreid.data.datasets import DATASET_REGISTRY


@DATASET_REGISTRY.register()
class TinyPeoplePairs:
    """``carray``: image paths, pair ``i`` being items ``2i`` and ``2i + 1``; ``is_same``: per pair."""

    def __init__(self, root="datasets", **kwargs):
        folder = os.path.join(root, tiny_people.FOLDER)
        paths = [
            os.path.join(folder, s, n)
            for s in ("query", "gallery")
            for n in sorted(os.listdir(os.path.join(folder, s)))
        ]
        self.carray, self.is_same = [], []
        for a, b in itertools.combinations(paths, 2):
            self.carray += [a, b]
            same = (
                tiny_people.parse_name(os.path.basename(a))[0]
                == tiny_people.parse_name(os.path.basename(b))[0]
            )
            self.is_same.append(same)


class TestPairsDataset(Dataset):
    def __init__(self, paths, labels, transform):
        self.paths, self.labels, self.transform = paths, labels, transform

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, index):
        return {"images": self.transform(read_image(self.paths[index])), "targets": index}
