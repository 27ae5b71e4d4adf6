"""AttrEvaluator gives upstream's numbers: the differential test against arrays and results
recorded by running upstream's own ``AttrEvaluator.get_attr_metrics`` (data/make_upstream_reference.py;
this test does not need upstream's code), and the evaluator's own pass (process / evaluate) with
the config's threshold."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

from fastreid.config import get_cfg
from fastreid.projects.attr import AttrEvaluator, add_attr_config

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "upstream_attr_metrics.json")
with open(DATA, encoding="utf-8") as f:
    CASES = json.load(f)["cases"]
KEYS = ["Accu", "Prec", "Recall", "F1", "mA", "metric"]


def test_the_recorded_cases_cover_the_edge_cases():
    names = {c["name"] for c in CASES}
    assert names == {
        "random",
        "random_thres_0.7",
        "edge_cases",
        "no_negatives",
        "labels_above_one",
        "all_negative",
    }
    edge = next(c for c in CASES if c["name"] == "edge_cases")
    gt, scores = np.array(edge["gt"]), np.array(edge["scores"])
    assert gt[:, 0].sum() == 0  # an attribute never on
    assert gt[0].sum() == 0 and gt[1].sum() == 0  # images with no positive label,
    assert (scores[0] < 0.5).all() and (scores[1] >= 0.5).all()  # predicted nothing, or everything
    assert (scores[2] == 0.5).all()  # at the threshold
    assert np.array(next(c["gt"] for c in CASES if c["name"] == "no_negatives"))[:, 0].all()


@pytest.mark.parametrize("case", CASES, ids=[f"{c['name']}-{c['dtype']}" for c in CASES])
def test_metrics_equal_upstreams(case):
    gt = np.array(case["gt"], dtype=case["dtype"])
    scores = np.array(case["scores"], dtype=case["dtype"])
    results = AttrEvaluator.get_attr_metrics(gt, scores, case["thres"])
    assert list(results) == KEYS
    for key in KEYS:
        assert results[key] == pytest.approx(case["upstream"][key], abs=1e-6), key


def test_the_evaluator_pass_uses_test_thres():
    case = next(c for c in CASES if c["name"] == "random_thres_0.7" and c["dtype"] == "float32")
    cfg = get_cfg()
    add_attr_config(cfg)
    cfg.TEST.THRES = 0.7
    evaluator = AttrEvaluator(cfg, {i: f"a{i}" for i in range(8)})
    evaluator.reset()
    gt, scores = torch.tensor(case["gt"]), torch.tensor(case["scores"])
    for start in range(0, len(gt), 16):  # three batches
        evaluator.process({"targets": gt[start : start + 16]}, scores[start : start + 16])
    results = evaluator.evaluate()
    for key in KEYS:
        assert results[key] == pytest.approx(case["upstream"][key], abs=1e-6), key


def test_an_empty_evaluation_is_an_error():
    cfg = get_cfg()
    add_attr_config(cfg)
    with pytest.raises(ValueError, match="no test images"):
        AttrEvaluator(cfg, {}).evaluate()
