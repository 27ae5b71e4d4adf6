"""The retrieval evaluator gives upstream's Recall@K and pytorch-metric-learning's mAP@R: the
differential test against the numbers recorded by running upstream's own ``recall_at_ks`` (and
pytorch-metric-learning) on the cases of retri_cases.py (data/make_upstream_reference.py; this
test needs neither), on self-search (CUB, Cars-196, SOP, with one-image classes) and on In-Shop's
query/gallery split, cosine and Euclidean; then the evaluator's own pass (process / evaluate)
with upstream's string labels, TEST.RECALLS, and chunking."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch
from retri_cases import CASES, draw

from fastreid.config import get_cfg
from fastreid.projects.retri import RetriEvaluator, add_retri_config, recall_at_ks, retrieval_metrics

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "upstream_retri_metrics.json")
with open(DATA, encoding="utf-8") as f:
    RECORDED = {c["name"]: c for c in json.load(f)["cases"]}


def _split(data: dict) -> tuple:
    if "features" in data:
        return data["features"], data["labels"], None, None
    return data["query_features"], data["query_labels"], data["gallery_features"], data["gallery_labels"]


def test_every_case_is_recorded():
    assert set(RECORDED) == set(CASES)
    assert RECORDED["sop"]["ks"] == [1, 10, 100, 1000] and RECORDED["inshop"]["ks"] == [1, 10, 20, 30, 40, 50]
    assert len(draw("sop")["features"]) > 1000  # Recall@1000 within the candidates


@pytest.mark.parametrize("name", sorted(CASES))
def test_recall_at_ks_equals_upstreams(name):
    case = RECORDED[name]
    q, ql, g, gl = _split(draw(name))
    ours = recall_at_ks(
        torch.from_numpy(q), ql, case["ks"], None if g is None else torch.from_numpy(g), gl, case["cosine"]
    )
    assert list(ours) == case["ks"]
    for k in case["ks"]:
        assert ours[k] == pytest.approx(case["upstream_recall_at_ks"][str(k)], abs=1e-6), k


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_map_at_r_equals_pytorch_metric_learnings(name, dtype):
    case = RECORDED[name]
    q, ql, g, gl = _split(draw(name))
    q, g = q.astype(dtype), None if g is None else g.astype(dtype)
    rows = 37 if len(q) < 500 else 401  # several chunks, the last one short
    result = retrieval_metrics(q, ql, case["ks"], g, gl, cosine=case["cosine"], chunk_rows=rows)
    assert result["map_at_r"] == pytest.approx(case["pml_map_at_r"], abs=1e-6)
    for k in case["ks"]:  # unrounded, against the float64 reference the generator checked upstream with
        assert result["recall"][k] == pytest.approx(case["numpy_float64"]["recall"][str(k)], abs=1e-12)


def _cfg(recalls):
    cfg = get_cfg()
    add_retri_config(cfg)
    cfg.TEST.RECALLS = recalls
    return cfg


def _run(evaluator, features, labels, batch=32):
    evaluator.reset()
    for start in range(0, len(labels), batch):
        inputs = {"targets": labels[start : start + batch]}
        evaluator.process(inputs, torch.from_numpy(features[start : start + batch]))
    return evaluator.evaluate()


def test_the_evaluator_searches_the_test_set_itself_with_string_labels():
    case = RECORDED["cub"]
    data = draw("cub")
    labels = [str(v) for v in data["labels"]]  # upstream's test labels are the list file's strings
    results = _run(RetriEvaluator(_cfg([1, 2, 4, 8]), num_query=len(labels)), data["features"], labels)
    assert list(results) == ["Recall@1", "Recall@2", "Recall@4", "Recall@8", "mAP@R", "metric"]
    for k in (1, 2, 4, 8):
        assert results[f"Recall@{k}"] == pytest.approx(case["upstream_recall_at_ks"][str(k)], abs=1e-6)
    assert results["mAP@R"] == pytest.approx(round(case["pml_map_at_r"] * 100, 2), abs=1e-6)
    assert results["metric"] == results["Recall@1"]


def test_the_evaluator_searches_the_gallery_for_inshop_queries():
    case = RECORDED["inshop"]
    data = draw("inshop")
    features = np.concatenate([data["query_features"], data["gallery_features"]])
    labels = torch.from_numpy(np.concatenate([data["query_labels"], data["gallery_labels"]]))  # int targets
    evaluator = RetriEvaluator(_cfg(case["ks"]), num_query=len(data["query_labels"]))
    results = _run(evaluator, features, labels)
    for k in case["ks"]:
        assert results[f"Recall@{k}"] == pytest.approx(case["upstream_recall_at_ks"][str(k)], abs=1e-6)
    assert results["mAP@R"] == pytest.approx(round(case["pml_map_at_r"] * 100, 2), abs=1e-6)


def test_hand_computed_map_at_r_and_k_beyond_the_candidates():
    # classes a a b b a; 1-D cosine features: +1 or -1, so ranks are fixed
    q = torch.tensor([[1.0, 0.1], [1.0, 0.2], [-1.0, 0.0], [-1.0, 0.1], [1.0, 0.3]])
    result = retrieval_metrics(q, ["a", "a", "b", "b", "a"], [1, 50], cosine=True)
    # each "a" has R=2 and finds the other two "a" first: AP 1; each "b" has R=1 and finds the other: AP 1
    assert result["map_at_r"] == pytest.approx(1.0)
    assert result["recall"] == {1: 1.0, 50: 1.0}  # K past the 4 candidates counts them all
    # a query whose single relevant candidate comes second: P(1)=0 -> AP of R=1 is 0
    g = torch.tensor([[1.0, 0.0], [0.9, 0.4]])
    result = retrieval_metrics(torch.tensor([[1.0, 0.0]]), [1], [1, 2], g, [2, 1], cosine=True)
    assert result["map_at_r"] == 0.0 and result["recall"] == {1: 0.0, 2: 1.0}


def test_bad_input_says_what_is_wrong():
    with pytest.raises(ValueError, match="both None or both"):
        retrieval_metrics(torch.zeros(2, 2), [0, 1], [1], torch.zeros(2, 2), None)
    with pytest.raises(ValueError, match="one label per feature row"):
        retrieval_metrics(torch.zeros(3, 2), [0, 1], [1])
    with pytest.raises(ValueError, match="TEST.RECALLS"):
        retrieval_metrics(torch.zeros(3, 2), [0, 1, 1], [0])
    with pytest.raises(ValueError, match="TEST.RECALLS is empty"):
        RetriEvaluator(_cfg([]), num_query=3)
    evaluator = RetriEvaluator(_cfg([1]), num_query=3)
    with pytest.raises(ValueError, match="one feature row per image"):
        evaluator.process({"targets": [1, 2]}, torch.zeros(3, 4))
