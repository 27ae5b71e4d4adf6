"""MS1MV2 (MS-Celeb-1M cleaned by InsightFace): the face training set, one folder per identity."""

from __future__ import annotations

import os
from typing import Any

from fastreid.data.datasets import DATASET_REGISTRY
from fastreid.data.datasets.bases import DatasetFormatError, TrainOnlyDataset

from ...registration import register_once

__all__ = ["MS1MV2"]

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")


class MS1MV2(TrainOnlyDataset):
    """Training images ``{root}/MS_Celeb_1M/<identity>/*.jpg`` (upstream's layout): each folder
    is an identity, labelled ``ms1mv2_<folder>``; camera 0 for all. Folders and images are read
    in sorted order. Upstream keeps only the first 10 000 images (a debugging leftover); here
    every image trains."""

    dataset_dir = "MS_Celeb_1M"
    dataset_name = "ms1mv2"
    layout = "{root}/MS_Celeb_1M/<identity>/<image>.jpg (one folder per identity)"
    url = "https://github.com/deepinsight/insightface/tree/master/recognition/_datasets_"
    synthetic_available = True
    synthetic_command = "python -m fastreid.data.synthetic.faces --root {root}"

    def __init__(self, root: str = "datasets", **kwargs: Any) -> None:
        self.root = root
        self.dataset_dir = os.path.join(self.root, self.dataset_dir)
        self.check_before_run([self.dataset_dir], root=root)
        super().__init__(self.process_dirs(), **kwargs)

    def process_dirs(self) -> list:
        train = []
        for fid in sorted(os.listdir(self.dataset_dir)):
            folder = os.path.join(self.dataset_dir, fid)
            if not os.path.isdir(folder):
                continue
            for name in sorted(os.listdir(folder)):
                if name.lower().endswith(IMAGE_SUFFIXES):
                    train.append((os.path.join(folder, name), f"{self.dataset_name}_{fid}", "0"))
        if not train:
            raise DatasetFormatError(
                f"MS1MV2: no images in {self.dataset_dir}; expected {self.layout.format(root=self.root)}"
            )
        return train


register_once(DATASET_REGISTRY, MS1MV2)
