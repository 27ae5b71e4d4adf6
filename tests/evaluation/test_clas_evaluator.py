"""Upstream's classification evaluator (FastClas): top-k accuracy and Acc@1 over batches."""

import pytest
import torch

from fastreid.evaluation import ClasEvaluator
from fastreid.evaluation.clas_evaluator import accuracy


def test_accuracy_counts_targets_in_the_top_k():
    logits = torch.tensor([[0.1, 0.7, 0.2], [0.5, 0.1, 0.4], [0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])
    targets = torch.tensor([1, 2, 0, 0])
    top1, top2 = accuracy(logits, targets, topk=(1, 2))
    assert top1.item() == pytest.approx(50.0)  # rows 0 and 3
    assert top2.item() == pytest.approx(75.0)  # row 1's target is second; row 2's is last


def test_clas_evaluator_accumulates_over_batches():
    ev = ClasEvaluator(cfg=None)
    ev.reset()
    ev.process({"targets": torch.tensor([0, 1])}, torch.tensor([[2.0, 1.0], [3.0, 1.0]]))  # 1 of 2
    ev.process({"targets": torch.tensor([1, 1, 0])}, torch.tensor([[0.0, 1.0], [0.0, 1.0], [1.0, 0.0]]))
    results = ev.evaluate()
    assert results["Acc@1"] == pytest.approx(80.0) and results["metric"] == results["Acc@1"]
    ev.reset()
    with pytest.raises(RuntimeError, match="no predictions"):
        ev.evaluate()


def test_clas_evaluator_rejects_outputs_that_are_not_logits():
    with pytest.raises(ValueError, match="logits"):
        ClasEvaluator(cfg=None).process({"targets": torch.tensor([0, 1])}, torch.zeros(3, 4))
