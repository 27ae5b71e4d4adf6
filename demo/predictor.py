"""Upstream FastReID's ``demo/predictor.py`` entry point, ``FeatureExtractionDemo``, on top of
``fastreid.inference.FeatureExtractor`` (same test transforms as the evaluation).

    from predictor import FeatureExtractionDemo      # with demo/ on sys.path, as upstream
    demo = FeatureExtractionDemo(cfg)
    feat = demo.run_on_image(cv2.imread("person.jpg"))   # 1 x D, not normalised
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import torch

from fastreid.inference import FeatureExtractor

__all__ = ["FeatureExtractionDemo"]


class FeatureExtractionDemo:
    """``run_on_image(bgr_array)`` and ``run_on_loader(loader)`` as upstream. ``parallel`` is
    accepted for compatibility; the loader's workers already decode in parallel."""

    def __init__(self, cfg, parallel: bool = False) -> None:
        self.cfg = cfg
        self.parallel = parallel
        self.extractor = FeatureExtractor(cfg=cfg, device=None)
        self.predictor = self.extractor.predictor

    def run_on_image(self, original_image: np.ndarray) -> torch.Tensor:
        """Features (1 x D) of an OpenCV image (H x W x 3, BGR)."""
        return self.extractor(original_image, bgr=True)

    def run_on_loader(
        self, data_loader: Iterable[dict]
    ) -> Iterator[tuple[torch.Tensor, np.ndarray, np.ndarray]]:
        """``(features, pids, camids)`` of each batch of a re-ID test loader."""
        for batch in data_loader:
            yield (
                self.extractor.features_of_batch(batch["images"]),
                batch["targets"].cpu().numpy(),
                batch["camids"].cpu().numpy(),
            )
