"""Classification evaluation (upstream FastReID's ``fastreid.evaluation.clas_evaluator``, used by its
FastClas project): top-k accuracy of the model's class logits over a test set."""

from __future__ import annotations

import copy
import logging
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Optional

import torch

from fastreid.utils import comm

from .evaluator import DatasetEvaluator

__all__ = ["ClasEvaluator", "accuracy"]

logger = logging.getLogger(__name__)


@torch.no_grad()
def accuracy(output: torch.Tensor, target: torch.Tensor, topk: Sequence[int] = (1,)) -> list[torch.Tensor]:
    """The top-k accuracy (percent, as 1-element tensors) of logits ``output`` for each k in ``topk``."""
    maxk = max(topk)
    predicted = output.topk(maxk, 1, True, True)[1].t()
    correct = predicted.eq(target.view(1, -1).expand_as(predicted))
    return [correct[:k].reshape(-1).float().sum(0, keepdim=True).mul_(100.0 / target.size(0)) for k in topk]


class ClasEvaluator(DatasetEvaluator):
    """``Acc@1`` (and ``metric``, the same) of the logits the model returns in eval mode against the
    batches' ``targets``; gathered across processes."""

    def __init__(self, cfg: Any, output_dir: Optional[str] = None) -> None:
        self.cfg = cfg
        self._output_dir = output_dir
        self._predictions: list[dict[str, float]] = []

    def reset(self) -> None:
        self._predictions = []

    def process(self, inputs: dict, outputs: torch.Tensor) -> None:
        logits = outputs.detach().to("cpu", torch.float32)
        labels = torch.as_tensor(inputs["targets"]).detach().cpu()
        if logits.dim() != 2 or logits.size(0) != labels.numel():
            raise ValueError(
                f"ClasEvaluator.process: expected N x num_classes logits for {labels.numel()} targets, "
                f"got shape {tuple(logits.shape)}"
            )
        (acc1,) = accuracy(logits, labels, topk=(1,))
        self._predictions.append(
            {"num_correct": float(acc1) * labels.numel() / 100, "num_samples": labels.numel()}
        )

    def evaluate(self) -> dict:
        predictions = self._predictions
        if comm.get_world_size() > 1:
            comm.synchronize()
            gathered = comm.gather(predictions, dst=0)
            if not comm.is_main_process():
                return {}
            predictions = [p for part in gathered for p in part]
        total = sum(p["num_samples"] for p in predictions)
        if total == 0:
            raise RuntimeError("ClasEvaluator.evaluate: no predictions; was process() called?")
        acc1 = sum(p["num_correct"] for p in predictions) / total * 100
        self._results = OrderedDict([("Acc@1", acc1), ("metric", acc1)])
        return copy.deepcopy(self._results)
