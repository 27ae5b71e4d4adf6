"""Datasets for the hostile loader tests, at module level so that spawned workers can import them."""

from __future__ import annotations

import os
import time

from fastreid.data.data_utils import read_image_tensor
from fastreid.data.loading.seeds import sample_index


class FileDataset:
    """Reads each path with the training fast path; returns the image and the loading pid."""

    def __init__(self, paths: list[str], delay: float = 0.0):
        self.img_items = [(p, 0, 0) for p in paths]
        self.delay = delay

    def __len__(self) -> int:
        return len(self.img_items)

    def __getitem__(self, item):
        index = sample_index(item)
        if self.delay:
            time.sleep(self.delay)
        image = read_image_tensor(self.img_items[index][0])
        return {"images": image, "index": index, "pid": os.getpid()}
