"""``AttrEvaluator``: upstream FastAttr's pedestrian-attribute metrics.

With ``pred = score >= TEST.THRES`` (1 or 0) and ``eps = 1e-20``:

- label-based **mA**: per attribute ``(TP / (P + eps) + TN / (N + eps)) / 2`` (the mean of the
  recall of the positives and of the negatives), averaged over attributes; an attribute without
  positives in the test set thus scores at most 50 (its positive recall counts as 0);
- instance-based, per image then averaged over images: **Accu** ``|pred & gt| / (|pred | gt| + eps)``,
  **Prec** ``|pred & gt| / (|pred| + eps)``, **Recall** ``|pred & gt| / (|gt| + eps)`` (an image
  with no positive label and none predicted scores 0 in all three);
- **F1** ``2 * Prec * Recall / (Prec + Recall + eps)`` of those two means.

All in percent; ``metric`` is mA (what the best checkpoint follows). As upstream, the label-based
terms are computed in the inputs' floating dtype (float32 from the model and the loader) and the
instance-based ones in float64, so the numbers are upstream's to the last bits
(tests/attr/test_attr_evaluator.py compares them with upstream's own function). Label values above
1 (Market-1501's age) enter the label-based sums as they are, as upstream. A score that is NaN
predicts 0 (upstream leaves NaN in its predictions).
"""

from __future__ import annotations

import copy
import logging
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Optional

import numpy as np
import torch
from tabulate import tabulate

from fastreid.evaluation.evaluator import DatasetEvaluator
from fastreid.utils import comm

__all__ = ["AttrEvaluator"]

logger = logging.getLogger("fastreid.attr_evaluation")

EPS = 1e-20


class AttrEvaluator(DatasetEvaluator):
    """``AttrEvaluator(cfg, attr_dict, thres=0.5, output_dir=None)`` (upstream's signature).
    As upstream, the threshold applied is ``cfg.TEST.THRES``; ``thres`` is used only when the
    config has no ``TEST.THRES``."""

    def __init__(
        self, cfg: Any, attr_dict: Optional[Mapping[int, str]] = None, thres: float = 0.5, output_dir=None
    ) -> None:
        self.cfg = cfg
        self.attr_dict = dict(attr_dict or {})
        self.thres = thres
        self._output_dir = output_dir
        self._cpu_device = torch.device("cpu")
        self.pred_logits: list[torch.Tensor] = []
        self.gt_labels: list[torch.Tensor] = []
        self._results: OrderedDict = OrderedDict()

    def reset(self) -> None:
        self.pred_logits = []
        self.gt_labels = []

    def process(self, inputs: Mapping[str, Any], outputs: torch.Tensor) -> None:
        self.gt_labels.append(torch.as_tensor(inputs["targets"]).to(self._cpu_device, torch.float32))
        self.pred_logits.append(outputs.to(self._cpu_device, torch.float32))

    @staticmethod
    def get_attr_metrics(gt_labels: Any, pred_logits: Any, thres: float) -> OrderedDict:
        """Upstream's metrics (see the module docstring) of N x C labels and scores; percentages."""
        results, _ = _attr_metrics(gt_labels, pred_logits, thres)
        return results

    def _threshold(self) -> float:
        test = getattr(self.cfg, "TEST", None)
        return float(test.THRES) if test is not None and "THRES" in test else float(self.thres)

    def evaluate(self) -> dict:
        scores = torch.cat(self.pred_logits) if self.pred_logits else torch.zeros(0, 0)
        labels = torch.cat(self.gt_labels) if self.gt_labels else torch.zeros(0, 0)
        if comm.get_world_size() > 1:
            comm.synchronize()
            gathered = (comm.gather_rows(scores), comm.gather_rows(labels))
            if not comm.is_main_process():
                return {}
            scores, labels = gathered  # type: ignore[assignment]
        if scores.shape[0] == 0:
            raise ValueError("AttrEvaluator: no test images were evaluated")
        results, per_attribute = _attr_metrics(labels.numpy(), scores.numpy(), self._threshold())
        self._results = results
        self._log_per_attribute(per_attribute)
        return copy.deepcopy(self._results)

    def _log_per_attribute(self, per_attribute: np.ndarray) -> None:
        names = [self.attr_dict.get(i, str(i)) for i in range(len(per_attribute))]
        rows = [[name, 100 * float(v)] for name, v in zip(names, per_attribute)]
        table = tabulate(rows, headers=["attribute", "mA"], tablefmt="pipe", floatfmt=".2f", numalign="left")
        logger.info("mA of each attribute:\n" + table)


def _attr_metrics(gt_labels: Any, pred_logits: Any, thres: float) -> tuple[OrderedDict, np.ndarray]:
    gt = np.asarray(gt_labels)
    scores = np.asarray(pred_logits)
    if gt.shape != scores.shape or gt.ndim != 2:
        raise ValueError(f"labels and scores must both be N x C; got {gt.shape} and {scores.shape}")
    dtype = np.result_type(gt.dtype, scores.dtype)
    if not np.issubdtype(dtype, np.floating):
        dtype = np.dtype(np.float64)
    gt = gt.astype(dtype, copy=False)
    pred = (scores >= thres).astype(dtype)

    # label-based: each attribute's recall of positives and of negatives
    correct_pos = (pred * gt).sum(axis=0)
    real_pos = gt.sum(axis=0)
    correct_neg = ((1 - pred) * (1 - gt)).sum(axis=0)
    real_neg = (1 - gt).sum(axis=0)
    label_ma_verbose = (correct_pos / (real_pos + EPS) + correct_neg / (real_neg + EPS)) * 0.5
    label_ma = label_ma_verbose.mean()

    # instance-based: each image's predicted set against its true set
    pred_on, gt_on = pred.astype(bool), gt.astype(bool)
    intersect = (pred_on & gt_on).astype(np.float64).sum(axis=1)
    union = (pred_on | gt_on).astype(np.float64).sum(axis=1)
    ins_acc = (intersect / (union + EPS)).mean()
    ins_prec = (intersect / (pred_on.astype(np.float64).sum(axis=1) + EPS)).mean()
    ins_rec = (intersect / (gt_on.astype(np.float64).sum(axis=1) + EPS)).mean()
    ins_f1 = (2 * ins_prec * ins_rec) / (ins_prec + ins_rec + EPS)

    results = OrderedDict()
    results["Accu"] = float(ins_acc * 100)
    results["Prec"] = float(ins_prec * 100)
    results["Recall"] = float(ins_rec * 100)
    results["F1"] = float(ins_f1 * 100)
    results["mA"] = float(label_ma * 100)
    results["metric"] = float(label_ma * 100)
    return results, np.asarray(label_ma_verbose, dtype=np.float64)
