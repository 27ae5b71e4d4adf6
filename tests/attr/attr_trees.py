"""Writers of tiny Market-1501 / DukeMTMC-reID attribute trees for the reader tests."""

from __future__ import annotations

import os

import numpy as np


def write_identity_attribute_tree(
    folder: str, mat_name: str, key: str, train: dict[str, list], test: dict[str, list], images: dict
) -> str:
    """``folder/bounding_box_{train,test}/<names>`` (empty files: the readers only list them) and
    ``folder/<mat_name>`` holding struct ``key`` with ``train`` and ``test`` structs of
    attribute -> values (1/2) and ``image_index``."""
    from scipy.io import savemat

    for split, names in images.items():
        os.makedirs(os.path.join(folder, f"bounding_box_{split}"), exist_ok=True)
        for name in names:
            open(os.path.join(folder, f"bounding_box_{split}", name), "wb").close()

    def struct(split: dict[str, list]) -> dict:
        out = {k: np.asarray(v, dtype=np.float64) for k, v in split.items() if k != "image_index"}
        out["image_index"] = np.asarray(split["image_index"], dtype=object)
        return out

    savemat(os.path.join(folder, mat_name), {key: {"train": struct(train), "test": struct(test)}})
    return folder
