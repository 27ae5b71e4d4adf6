"""Re-ID data: datasets, transforms, samplers and loaders.

Submodules are imported on first use so that ``import fastreid.data.loading.seeds`` (used inside
worker processes) stays light.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "build_reid_train_loader": "build",
    "build_reid_test_loader": "build",
    "fast_batch_collator": "build",
    "CommDataset": "common",
    "DATASET_REGISTRY": "datasets",
    "build_transforms": "transforms",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'fastreid.data' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
