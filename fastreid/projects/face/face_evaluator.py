"""``FaceEvaluator``: verification accuracy of a pairs test set (upstream FastFace's evaluator).

The embeddings are L2-normalised; pair ``k`` is images ``2k`` and ``2k + 1``. Results, in percent
except the thresholds (squared distances, 0..4):

- ``Accuracy`` / ``metric``: upstream's 10-fold accuracy at the best threshold of the other folds
  (:func:`~.verification.evaluate`), ``Threshold``: the mean of the folds' thresholds;
- ``TAR@FAR=1e-3`` and ``TAR@FAR=1e-2``: the true accept rate at the threshold where the other
  folds' false accept rate reaches 0.1% / 1% (:func:`~.verification.calculate_val`; with fewer
  than 1000 different pairs per fold a FAR of 1e-3 is 0 false accepts).

The ROC curve (averaged over the folds) is saved as ``<output_dir>/<dataset>_roc.png`` as upstream
does, and its points as ``<dataset>_roc.json``.
"""

from __future__ import annotations

import copy
import json
import logging
import os
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Optional

import numpy as np
import torch
import torch.nn.functional as F

from fastreid.evaluation.evaluator import DatasetEvaluator
from fastreid.utils import comm
from fastreid.utils.file_io import PathManager
from fastreid.utils.visualizer import agg_pyplot

from .verification import VAL_THRESHOLDS, calculate_val, evaluate

__all__ = ["FaceEvaluator", "gen_plot"]

logger = logging.getLogger("fastreid.face_evaluator")

FAR_TARGETS = (1e-3, 1e-2)


def gen_plot(fpr: np.ndarray, tpr: np.ndarray, path: str) -> None:
    """Save the ROC curve as an image (matplotlib's headless backend)."""
    plt = agg_pyplot()
    fig = plt.figure()
    plt.xlabel("FPR", fontsize=14)
    plt.ylabel("TPR", fontsize=14)
    plt.title("ROC Curve", fontsize=14)
    plt.plot(fpr, tpr, linewidth=2)
    fig.savefig(path)
    plt.close(fig)


class FaceEvaluator(DatasetEvaluator):
    """``FaceEvaluator(cfg, labels, dataset_name, output_dir=None)`` (upstream's signature):
    ``labels`` is the set's ``is_same`` (one bool per pair)."""

    def __init__(
        self, cfg: Any, labels: Sequence[bool], dataset_name: str, output_dir: Optional[str] = None
    ) -> None:
        self.cfg = cfg
        self.labels = np.asarray(labels, dtype=bool)
        self.dataset_name = dataset_name
        self._output_dir = output_dir
        self.features: list[torch.Tensor] = []
        self.indices: list[torch.Tensor] = []
        self._results: OrderedDict = OrderedDict()

    def reset(self) -> None:
        self.features = []
        self.indices = []

    def process(self, inputs: Mapping[str, Any], outputs: torch.Tensor) -> None:
        self.features.append(outputs.detach().to("cpu", torch.float32))
        if isinstance(inputs, Mapping) and "targets" in inputs:
            self.indices.append(torch.as_tensor(inputs["targets"]).to("cpu", torch.int64).reshape(-1))

    def _ordered_features(self) -> Optional[torch.Tensor]:
        features = torch.cat(self.features) if self.features else torch.zeros(0, 0)
        indices = (
            torch.cat(self.indices) if len(self.indices) == len(self.features) and self.indices else None
        )
        if comm.get_world_size() > 1:
            comm.synchronize()
            gathered = comm.gather_rows(features)
            gathered_idx = comm.gather_rows(
                indices if indices is not None else torch.zeros(0, dtype=torch.int64)
            )
            if not comm.is_main_process():
                return None
            features, indices = gathered, gathered_idx  # type: ignore[assignment]
        if indices is not None and indices.numel() == features.size(0):
            # the images' own indices: the order of the pairs whatever the loader's sharding, each once
            order = torch.argsort(indices, stable=True)
            indices, features = indices[order], features[order]
            keep = torch.ones_like(indices, dtype=torch.bool)
            keep[1:] = indices[1:] != indices[:-1]
            features = features[keep]
        return features

    def evaluate(self) -> dict:
        features = self._ordered_features()
        if features is None:
            return {}
        expected = 2 * len(self.labels)
        if features.size(0) != expected:
            raise ValueError(
                f"FaceEvaluator({self.dataset_name}): {features.size(0)} embeddings for {len(self.labels)} pairs "
                f"(need {expected})"
            )
        embeddings = F.normalize(features, p=2, dim=1).numpy()
        tpr, fpr, accuracy, best_thresholds = evaluate(embeddings, self.labels)
        self._results = OrderedDict()
        self._results["Accuracy"] = float(accuracy.mean() * 100)
        self._results["Threshold"] = float(best_thresholds.mean())
        for far_target in FAR_TARGETS:
            val, _, _ = calculate_val(
                VAL_THRESHOLDS, embeddings[0::2], embeddings[1::2], self.labels, far_target
            )
            self._results[f"TAR@FAR={far_target:.0e}"] = float(val * 100)
        self._results["metric"] = float(accuracy.mean() * 100)
        self._save_roc(fpr, tpr)
        return copy.deepcopy(self._results)

    def _save_roc(self, fpr: np.ndarray, tpr: np.ndarray) -> None:
        if not self._output_dir:
            return
        PathManager.mkdirs(self._output_dir)
        base = os.path.join(self._output_dir, self.dataset_name + "_roc")
        with open(base + ".json", "w", encoding="utf-8") as f:
            json.dump({"fpr": fpr.tolist(), "tpr": tpr.tolist()}, f)
        try:
            gen_plot(fpr, tpr, base + ".png")
        except ImportError:
            logger.info("matplotlib is not installed: the ROC curve is saved as JSON only")
