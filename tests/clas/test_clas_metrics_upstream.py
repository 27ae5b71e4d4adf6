"""ClasEvaluator gives upstream's numbers: the differential test against logits, labels and results
recorded by running upstream's own ``ClasEvaluator`` and ``accuracy`` (data/make_upstream_reference.py;
this test does not need upstream's code), batch by batch as a loader gives them; and when Acc@5 is
reported."""

from __future__ import annotations

import json
import os

import pytest
import torch

from fastreid.evaluation import ClasEvaluator

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "upstream_clas_metrics.json")
with open(DATA, encoding="utf-8") as f:
    CASES = json.load(f)["cases"]


def _evaluate(case: dict) -> dict:
    logits = torch.tensor(case["logits_x8"], dtype=torch.float32) / 8
    labels = torch.tensor(case["labels"], dtype=torch.int64)
    evaluator = ClasEvaluator(cfg=None)
    evaluator.reset()
    start = 0
    for size in case["batches"]:
        evaluator.process({"targets": labels[start : start + size]}, logits[start : start + size])
        start += size
    return evaluator.evaluate()


def test_the_recorded_cases_cover_the_edge_cases():
    by_name = {c["name"]: c for c in CASES}
    assert by_name["all_right"]["upstream"]["Acc@1"] == 100 and by_name["all_wrong"]["upstream"]["Acc@1"] == 0
    assert 1 in by_name["uneven_batches"]["batches"]  # a batch of one image
    assert len(by_name["two_classes"]["logits_x8"][0]) == 2  # no Acc@5 with fewer than 6 classes
    for case in CASES:  # no ties: every top-k is the same on any machine
        assert all(len(set(row)) == len(row) for row in case["logits_x8"])
        assert sum(case["batches"]) == len(case["labels"])


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_accuracies_equal_upstreams(case):
    """Upstream sums float32 percentages per batch (float32: ~6e-8 relative per operation); these
    are exact counts, so the two agree to 1e-6 relative."""
    results = _evaluate(case)
    expected = case["upstream"]
    keys = ["Acc@1", "Acc@5", "metric"] if "Acc@5" in expected else ["Acc@1", "metric"]
    assert list(results) == keys
    for key in keys:
        assert results[key] == pytest.approx(expected[key], rel=1e-6, abs=1e-6), key
    assert results["metric"] == results["Acc@1"]


def test_acc5_is_the_target_among_the_five_largest_logits():
    evaluator = ClasEvaluator(cfg=None)
    logits = torch.arange(6, dtype=torch.float32).repeat(4, 1)  # class 5 largest, class 0 smallest
    evaluator.process({"targets": torch.tensor([5, 1, 0, 0])}, logits)
    results = evaluator.evaluate()
    assert results["Acc@1"] == 25.0 and results["Acc@5"] == 50.0
    evaluator.reset()
    evaluator.process({"targets": torch.tensor([0, 4])}, torch.rand(2, 5))
    assert "Acc@5" not in evaluator.evaluate()  # 5 classes: top-5 would always be 100
