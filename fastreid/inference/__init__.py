"""Inference: features of your own images, gallery search, and model export.

``FeatureExtractor`` (paths, PIL images, arrays, tensors -> features) is the entry point; the
command-line tools ``tools/extract_features.py``, ``tools/search.py`` and
``tools/deploy/export.py`` are built on this package.
"""

from .extractor import FeatureExtractor, build_inference_config, pick_device
from .inputs import NoImagesError, list_image_files, to_image_tensor

__all__ = [
    "FeatureExtractor",
    "NoImagesError",
    "build_inference_config",
    "list_image_files",
    "pick_device",
    "to_image_tensor",
]
