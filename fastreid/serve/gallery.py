"""The gallery a server searches: its features in a faiss index, its file names, and thumbnails
read by index (never by a path a client names)."""

from __future__ import annotations

import io
import logging
import os
import threading
from collections.abc import Sequence
from typing import Optional

import numpy as np
import torch
from PIL import Image

from fastreid.data.data_utils import read_image
from fastreid.inference.extractor import FeatureExtractor
from fastreid.inference.inputs import list_image_files
from fastreid.inference.search import GalleryIndex, IndexSpec, SearchIndexError, market_labels
from fastreid.inference.shards import load_features

__all__ = ["Gallery"]

logger = logging.getLogger(__name__)


class Gallery:
    """A model and the gallery it searches. ``search(image, k)`` is safe from several threads:
    the model runs under a lock (one forward at a time; batches would not help a 1-image query)."""

    def __init__(self, extractor: FeatureExtractor, feats: np.ndarray, files: Sequence[str]) -> None:
        if len(feats) != len(files):
            raise ValueError(f"{len(feats)} gallery features but {len(files)} file names")
        self.extractor = extractor
        self.files = [os.path.abspath(f) for f in files]
        self.index = GalleryIndex.build(np.ascontiguousarray(feats, np.float32), self.files, IndexSpec())
        try:  # Market-1501 names carry person and camera ids; other names show without them
            self.labels: Optional[tuple[np.ndarray, np.ndarray]] = market_labels(self.files)
        except SearchIndexError:
            self.labels = None
        self._lock = threading.Lock()

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
                raise ValueError(
                    f"{features} has no files.txt naming its images; the page could not show them"
                )
            logger.info(f"Gallery: {len(files)} features from {features}")
        elif folder:
            files = list_image_files(folder)
            logger.info(f"Gallery: extracting the features of {len(files)} images in {folder}")
            feats = torch.cat([f for _, f in extractor.iter_path_features(files)]).numpy()
        else:
            raise ValueError("a gallery needs a folder of images or a features file")
        return cls(extractor, feats, files)

    def __len__(self) -> int:
        return len(self.files)

    def features(self, image: torch.Tensor) -> np.ndarray:
        with self._lock, torch.inference_mode():
            batch = self.extractor.preprocess([image])
            return self.extractor.features_of_batch(batch).float().cpu().numpy()

    def search(self, image: torch.Tensor, k: int) -> list[dict]:
        dist, idx = self.index.search(self.features(image), k)
        results = []
        for rank, (d, i) in enumerate(zip(dist[0], idx[0]), start=1):
            if i < 0:
                continue
            entry = {
                "rank": rank,
                "index": int(i),
                "name": os.path.basename(self.files[i]),
                "distance": float(d),
            }
            if self.labels is not None:
                entry.update(pid=int(self.labels[0][i]), camid=int(self.labels[1][i]))
            results.append(entry)
        return results

    def thumbnail(self, i: int, height: int = 160) -> bytes:
        """The gallery image ``i`` as a JPEG, ``height`` pixels high."""
        image = read_image(self.files[i], "RGB")
        width = max(1, round(image.width * height / max(1, image.height)))
        out = io.BytesIO()
        image.resize((width, height), Image.Resampling.BILINEAR).save(out, "JPEG", quality=85)
        return out.getvalue()
