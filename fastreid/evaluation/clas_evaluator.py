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

__all__ = ["ClasEvaluator", "accuracy", "TOP_K"]

logger = logging.getLogger(__name__)

#: The second accuracy reported beside upstream's ``Acc@1``, when there are more classes than this.
TOP_K = 5


@torch.no_grad()
def accuracy(output: torch.Tensor, target: torch.Tensor, topk: Sequence[int] = (1,)) -> list[torch.Tensor]:
    """The top-k accuracy (percent, as 1-element tensors) of logits ``output`` for each k in ``topk``."""
    maxk = max(topk)
    predicted = output.topk(maxk, 1, True, True)[1].t()
    correct = predicted.eq(target.view(1, -1).expand_as(predicted))
    return [correct[:k].reshape(-1).float().sum(0, keepdim=True).mul_(100.0 / target.size(0)) for k in topk]


@torch.no_grad()
def num_correct(output: torch.Tensor, target: torch.Tensor, k: int) -> int:
    """How many rows of logits ``output`` have their ``target`` among their ``k`` largest (ties as
    ``torch.topk`` breaks them); an exact count."""
    top = output.topk(min(k, output.size(1)), 1, True, True)[1]
    return int(top.eq(target.view(-1, 1)).any(dim=1).sum())


class ClasEvaluator(DatasetEvaluator):
    """Upstream's keys: ``Acc@1`` and ``metric`` (the same number, what ``model_best.pth`` follows),
    in percent, of the logits the model returns in eval mode against the batches' ``targets``;
    gathered across processes. With more than :data:`TOP_K` classes also ``Acc@5`` (the target among
    the 5 largest logits; with 5 classes or fewer it would be 100 whatever the model does).

    Upstream sums float32 percentages per batch; here the correct predictions are counted exactly,
    so the numbers differ from upstream's at most by its float32 rounding (~1e-6 relative)."""

    def __init__(self, cfg: Any, output_dir: Optional[str] = None) -> None:
        self.cfg = cfg
        self._output_dir = output_dir
        self._predictions: list[dict[str, int]] = []

    def reset(self) -> None:
        self._predictions = []

    def process(self, inputs: dict, outputs: torch.Tensor) -> None:
        logits = outputs.detach().to("cpu", torch.float32)
        labels = torch.as_tensor(inputs["targets"]).detach().cpu().view(-1)
        if logits.dim() != 2 or logits.size(0) != labels.numel():
            raise ValueError(
                f"ClasEvaluator.process: expected N x num_classes logits for {labels.numel()} targets, "
                f"got shape {tuple(logits.shape)}"
            )
        self._predictions.append(
            {
                "num_correct": num_correct(logits, labels, 1),
                f"num_correct@{TOP_K}": num_correct(logits, labels, TOP_K),
                "num_samples": labels.numel(),
                "num_classes": logits.size(1),
            }
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
        self._results = OrderedDict([("Acc@1", acc1)])
        if max(p["num_classes"] for p in predictions) > TOP_K:
            self._results[f"Acc@{TOP_K}"] = sum(p[f"num_correct@{TOP_K}"] for p in predictions) / total * 100
        self._results["metric"] = acc1
        return copy.deepcopy(self._results)
