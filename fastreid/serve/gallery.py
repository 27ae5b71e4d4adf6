"""The gallery a server searches: its features in a faiss index, its file names, and thumbnails
read by index (never by a path a client names)."""

from __future__ import annotations

import functools
import io
import json
import logging
import os
import threading
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np
import torch
from PIL import Image

from fastreid.data.data_utils import read_image
from fastreid.inference.extractor import FeatureExtractor
from fastreid.inference.inputs import list_image_files
from fastreid.inference.search import GalleryIndex, IndexSpec, SearchIndexError, market_labels
from fastreid.inference.shards import META, load_features
from fastreid.utils.errors import UserError

__all__ = ["Gallery", "GalleryError"]

logger = logging.getLogger(__name__)

THUMBNAIL_HEIGHT = 160
#: Thumbnails kept in memory (a few KB each).
THUMBNAIL_CACHE = 512


class GalleryError(UserError, ValueError):
    """A gallery that cannot be served with this model (no images, features of another model, ...)."""


def _extraction_settings(features: str) -> dict[str, Any]:
    """``meta.json`` of a ``fastreid-extract`` output (the folder, or the folder of its .npy file)."""
    folder = features if os.path.isdir(features) else os.path.dirname(os.path.abspath(features))
    path = os.path.join(folder, META)
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
    except (OSError, ValueError) as e:
        logger.warning(f"{path} cannot be read ({e}); the gallery's extraction settings are not checked")
        return {}
    return meta if isinstance(meta, dict) else {}


class Gallery:
    """A model and the gallery it searches. ``search(image, k)`` is safe from several threads:
    the model runs under a lock (one forward at a time; batches would not help a 1-image query).

    ``feats`` must come from the same model: their width is checked against the model's features
    at construction (``source`` names them in the error)."""

    def __init__(
        self,
        extractor: FeatureExtractor,
        feats: np.ndarray,
        files: Sequence[str],
        *,
        source: str = "the gallery features",
    ) -> None:
        if len(feats) != len(files):
            raise GalleryError(f"{source}: {len(feats)} gallery features but {len(files)} file names")
        self.extractor = extractor
        self.files = [os.path.abspath(f) for f in files]
        self._lock = threading.Lock()
        height, width = (int(v) for v in extractor.cfg.INPUT.SIZE_TEST)
        self.feature_dim = int(self.features(torch.zeros(3, height, width, dtype=torch.uint8)).shape[1])
        if feats.ndim != 2 or feats.shape[1] != self.feature_dim:
            raise GalleryError(
                f"{source}: features of shape {tuple(feats.shape)}, but the model makes {self.feature_dim}-d "
                "features; extract the gallery again with this model (fastreid-extract)"
            )
        self.index = GalleryIndex.build(np.ascontiguousarray(feats, np.float32), self.files, IndexSpec())
        try:  # Market-1501 names carry person and camera ids; other names show without them
            self.labels: Optional[tuple[np.ndarray, np.ndarray]] = market_labels(self.files)
        except SearchIndexError:
            self.labels = None
        self._thumbnail = functools.lru_cache(maxsize=THUMBNAIL_CACHE)(self._make_thumbnail)

    @classmethod
    def build(
        cls,
        extractor: FeatureExtractor,
        folder: Optional[str] = None,
        features: Optional[str] = None,
    ) -> Gallery:
        """From a folder of images (their features computed now) or from ``fastreid-extract``'s
        output (``features``: its folder or file)."""
        if features:
            feats, files = load_features(features)
            if not files:
                raise GalleryError(
                    f"{features} has no files.txt naming its images; the page could not show them "
                    "(write the features with fastreid-extract)"
                )
            cls._check_extraction(extractor, features, files)
            logger.info(f"Gallery: {len(files)} features from {features}")
            return cls(extractor, feats, files, source=features)
        if folder:
            files = list_image_files(folder)
            logger.info(f"Gallery: extracting the features of {len(files)} images in {folder}")
            feats = torch.cat([f for _, f in extractor.iter_path_features(files)]).numpy()
            return cls(extractor, feats, files, source=folder)
        raise GalleryError("a gallery needs a folder of images or a features file")

    @staticmethod
    def _check_extraction(extractor: FeatureExtractor, features: str, files: Sequence[str]) -> None:
        """Warn when ``features`` were made with other weights or test settings than ``extractor``
        (the distances would compare two models' features), or when their images are missing
        (their thumbnails cannot be shown)."""
        meta = _extraction_settings(features)
        weights = extractor.cfg.MODEL.WEIGHTS
        ours = {
            "weights": os.path.abspath(weights) if weights else "",
            "flip": extractor.flip,
            "size_test": list(extractor.cfg.INPUT.SIZE_TEST),
        }
        for key, value in ours.items():
            if key in meta and meta[key] != value:
                logger.warning(
                    f"{features} was extracted with {key} {meta[key]!r}, the server's model has {value!r}: "
                    "query and gallery features may not be comparable"
                )
        missing = [f for f in files if not os.path.isfile(f)]
        if missing:
            logger.warning(
                f"{len(missing)} of the {len(files)} gallery images named by {features} are missing "
                f"(e.g. {missing[0]}); their thumbnails cannot be shown"
            )

    def __len__(self) -> int:
        return len(self.files)

    def name(self, i: int) -> str:
        """The file name (no folder) of gallery image ``i``: what a client is shown."""
        return os.path.basename(self.files[i])

    def features(self, image: torch.Tensor) -> np.ndarray:
        """The 1 x D feature of a 3 x H x W uint8 RGB image (any size: the test transforms resize it)."""
        with self._lock, torch.inference_mode():
            batch = self.extractor.preprocess([image])
            return self.extractor.features_of_batch(batch).float().cpu().numpy()

    def search(self, image: torch.Tensor, k: int) -> list[dict]:
        """The ``k`` nearest gallery images of ``image``: rank, index, name, distance (and pid,
        camid for Market-1501-style names), nearest first."""
        dist, idx = self.index.search(self.features(image), k)
        results = []
        for rank, (d, i) in enumerate(zip(dist[0], idx[0]), start=1):
            if i < 0:
                continue
            entry = {
                "rank": rank,
                "index": int(i),
                "name": self.name(int(i)),
                "distance": max(0.0, float(d)),  # 1 - cos: below 0 only by rounding
            }
            if self.labels is not None:
                entry.update(pid=int(self.labels[0][i]), camid=int(self.labels[1][i]))
            results.append(entry)
        return results

    def thumbnail(self, i: int) -> bytes:
        """The gallery image ``i`` as a JPEG, ``THUMBNAIL_HEIGHT`` pixels high (the last
        ``THUMBNAIL_CACHE`` are kept)."""
        if not 0 <= i < len(self.files):
            raise IndexError(f"no gallery image {i} (the gallery has {len(self.files)})")
        return self._thumbnail(i)

    def _make_thumbnail(self, i: int) -> bytes:
        image = read_image(self.files[i], "RGB")
        width = max(1, round(image.width * THUMBNAIL_HEIGHT / max(1, image.height)))
        out = io.BytesIO()
        image.resize((width, THUMBNAIL_HEIGHT), Image.Resampling.BILINEAR).save(out, "JPEG", quality=85)
        return out.getvalue()
