"""DukeMTMC-reID with the identity attributes of Lin et al. (``duke_attribute.mat``, 23 attributes)."""

from __future__ import annotations

import os.path as osp
from typing import Any

from fastreid.data.datasets import DATASET_REGISTRY

from ...registration import register_once
from .attribute_mat import attribute_items, read_attribute_mat
from .bases import Dataset

__all__ = ["DukeMTMCAttr"]


class DukeMTMCAttr(Dataset):
    """DukeMTMCAttr (upstream's name and conventions).

    URL: https://github.com/vana77/DukeMTMC-attribute

    The folder structure should be::

        DukeMTMC-reID/
            bounding_box_train/   # images
            bounding_box_test/    # images
            duke_attribute.mat

    Training items come from ``bounding_box_train`` with the ``train`` attributes, test (and val)
    items from ``bounding_box_test`` with the ``test`` ones.
    """

    dataset_dir = "DukeMTMC-reID"
    dataset_url = "http://vision.cs.duke.edu/DukeMTMC/data/misc/DukeMTMC-reID.zip"
    dataset_name = "dukemtmc"
    url = "https://github.com/vana77/DukeMTMC-attribute"
    layout = "{root}/DukeMTMC-reID/bounding_box_train/*.jpg, .../bounding_box_test/*.jpg and .../duke_attribute.mat"

    def __init__(self, root: str = "datasets", **kwargs: Any) -> None:
        self.root = root
        self.dataset_dir = osp.join(self.root, self.dataset_dir)
        self.train_dir = osp.join(self.dataset_dir, "bounding_box_train")
        self.test_dir = osp.join(self.dataset_dir, "bounding_box_test")
        self.annotation_file = osp.join(self.dataset_dir, "duke_attribute.mat")
        self.check_before_run(
            [self.dataset_dir, self.train_dir, self.test_dir, self.annotation_file], root=root
        )

        sorted_attrs, duke_attr = read_attribute_mat(
            self.annotation_file, "duke_attribute", type(self).__name__, self.url
        )
        attr_dict = {i: str(attr) for i, attr in enumerate(sorted_attrs)}
        train = self.process_dir(self.train_dir, duke_attr["train"], sorted_attrs)
        test = val = self.process_dir(self.test_dir, duke_attr["test"], sorted_attrs)
        super().__init__(train, val, test, attr_dict=attr_dict, **kwargs)

    def process_dir(self, dir_path: str, annotation: dict, sorted_attrs: list[str]) -> list:
        return attribute_items(
            type(self).__name__, dir_path, annotation, sorted_attrs, self.annotation_file, cameras=(1, 8)
        )


register_once(DATASET_REGISTRY, DukeMTMCAttr)
