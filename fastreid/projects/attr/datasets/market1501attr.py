"""Market-1501 with the identity attributes of Lin et al. (``market_attribute.mat``, 27 attributes)."""

from __future__ import annotations

import os.path as osp
import warnings
from typing import Any

from fastreid.data.datasets import DATASET_REGISTRY

from ...registration import register_once
from .attribute_mat import attribute_items, read_attribute_mat
from .bases import Dataset

__all__ = ["Market1501Attr"]


class Market1501Attr(Dataset):
    """Market1501Attr (upstream's name and conventions).

    URL: https://github.com/vana77/Market-1501_Attribute

    The folder structure should be::

        Market-1501-v15.09.15/
            bounding_box_train/   # images
            bounding_box_test/    # images
            market_attribute.mat

    (the three directly under the data sets folder also work, with upstream's deprecation warning).
    Training items come from ``bounding_box_train`` with the ``train`` attributes, test (and val)
    items from ``bounding_box_test`` with the ``test`` ones; junk (-1) and distractors (0) are left out.
    """

    _junk_pids = (0, -1)
    dataset_dir = ""
    dataset_url = "http://188.138.127.15:81/Datasets/Market-1501-v15.09.15.zip"
    dataset_name = "market1501"
    url = "https://github.com/vana77/Market-1501_Attribute"
    layout = (
        "{root}/Market-1501-v15.09.15/bounding_box_train/*.jpg, .../bounding_box_test/*.jpg and "
        ".../market_attribute.mat"
    )

    def __init__(self, root: str = "datasets", market1501_500k: bool = False, **kwargs: Any) -> None:
        self.root = root
        self.dataset_dir = osp.join(self.root, self.dataset_dir)

        # allow alternative directory structure
        self.data_dir = self.dataset_dir
        data_dir = osp.join(self.data_dir, "Market-1501-v15.09.15")
        if osp.isdir(data_dir):
            self.data_dir = data_dir
        else:
            warnings.warn(
                'The current data structure is deprecated. Please put data folders such as "bounding_box_train" '
                'under "Market-1501-v15.09.15".',
                stacklevel=2,
            )

        self.train_dir = osp.join(self.data_dir, "bounding_box_train")
        self.test_dir = osp.join(self.data_dir, "bounding_box_test")
        self.annotation_file = osp.join(self.data_dir, "market_attribute.mat")
        self.check_before_run([self.data_dir, self.train_dir, self.test_dir, self.annotation_file], root=root)

        sorted_attrs, market_attr = read_attribute_mat(
            self.annotation_file, "market_attribute", type(self).__name__, self.url
        )
        attr_dict = {i: str(attr) for i, attr in enumerate(sorted_attrs)}
        train = self.process_dir(self.train_dir, market_attr["train"], sorted_attrs)
        test = val = self.process_dir(self.test_dir, market_attr["test"], sorted_attrs)
        super().__init__(train, val, test, attr_dict=attr_dict, **kwargs)

    def process_dir(self, dir_path: str, annotation: dict, sorted_attrs: list[str]) -> list:
        return attribute_items(
            type(self).__name__,
            dir_path,
            annotation,
            sorted_attrs,
            self.annotation_file,
            cameras=(1, 6),
            junk_pids=self._junk_pids,
            max_pid=1501,
        )


register_once(DATASET_REGISTRY, Market1501Attr)
