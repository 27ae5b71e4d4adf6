"""PA-100K (Liu et al., HydraPlus-Net, ICCV 2017): 100 000 pedestrian images, 26 attributes."""

from __future__ import annotations

import os.path as osp
from typing import Any

import numpy as np

from fastreid.data.datasets import DATASET_REGISTRY

from ...registration import register_once
from .bases import Dataset, DatasetFormatError, load_mat

__all__ = ["PA100K"]

SPLITS = ("train", "val", "test")


def _cell_text(cell: Any) -> str:
    """The string of one MATLAB cell as ``loadmat`` gives it (upstream reads ``cell[0]``)."""
    value = cell
    while isinstance(value, np.ndarray):
        if value.size != 1:
            break
        value = value.reshape(-1)[0]
    return str(value)


class PA100K(Dataset):
    """Pedestrian attribute data set: 80k training, 10k validation and 10k test images.

    The folder structure should be::

        PA-100K/
            data/            # images
            annotation.mat   # train/val/test_images_name, train/val/test_label, attributes

    Items are ``(data/<name>, labels)`` with the label rows as float32, the attribute names from
    ``attributes``, as upstream reads them.
    """

    dataset_dir = "PA-100K"
    url = "https://github.com/xh-liu/HydraPlus-Net"
    layout = "{root}/PA-100K/data/*.jpg and {root}/PA-100K/annotation.mat"
    synthetic_command = "python -m fastreid.data.synthetic.attributes --root {root}"

    def __init__(self, root: str = "", **kwargs: Any) -> None:
        self.root = root
        self.dataset_dir = osp.join(self.root, self.dataset_dir)
        self.data_dir = osp.join(self.dataset_dir, "data")
        self.anno_mat_path = osp.join(self.dataset_dir, "annotation.mat")
        self.annotation_file = self.anno_mat_path

        self.check_before_run([self.data_dir, self.anno_mat_path], root=root or ".")
        train, val, test, attr_dict = self.extract_data()
        super().__init__(train, val, test, attr_dict=attr_dict, **kwargs)

    def extract_data(self) -> tuple[list, list, list, dict[int, str]]:
        # keys: train/val/test_images_name (N x 1 cells), train/val/test_label (N x K), attributes (K x 1 cell)
        anno_mat = load_mat(self.anno_mat_path, "PA100K")
        needed = ["attributes"] + [f"{s}_{k}" for s in SPLITS for k in ("images_name", "label")]
        missing = [key for key in needed if key not in anno_mat]
        if missing:
            raise DatasetFormatError(
                f"PA100K: {self.anno_mat_path} has no {', '.join(missing)}; PA-100K's annotation.mat "
                f"holds {', '.join(needed)} (use the file as published, {self.url})"
            )
        attrs = np.asarray(anno_mat["attributes"]).reshape(-1)
        attr_dict = {i: _cell_text(attr) for i, attr in enumerate(attrs)}

        def _extract(split: str) -> list:
            names = np.asarray(anno_mat[f"{split}_images_name"])
            labels = np.asarray(anno_mat[f"{split}_label"])
            num_imgs = names.shape[0] if names.ndim else 0
            if labels.ndim != 2 or labels.shape[1] != len(attr_dict):
                width = labels.shape[1] if labels.ndim == 2 else labels.size
                raise DatasetFormatError(
                    f"PA100K: {self.anno_mat_path}: {split}_label has {width} columns but 'attributes' "
                    f"names {len(attr_dict)} attributes; every split needs one column per attribute "
                    "(use the annotation file as published, or fix its label matrices)"
                )
            if labels.shape[0] != num_imgs:
                raise DatasetFormatError(
                    f"PA100K: {self.anno_mat_path}: {split}_label has {labels.shape[0]} rows but "
                    f"{split}_images_name {num_imgs} names; they must be one row per image"
                )
            data = []
            for i in range(num_imgs):
                name = _cell_text(names[i, 0] if names.ndim == 2 else names[i])
                attrs_i = labels[i, :].astype(np.float32)
                data.append((osp.join(self.data_dir, name), attrs_i))
            return data

        train, val, test = (_extract(split) for split in SPLITS)
        return train, val, test, attr_dict


register_once(DATASET_REGISTRY, PA100K)
