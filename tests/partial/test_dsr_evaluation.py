"""The DSR distance and DsrEvaluator against upstream's own code (data/make_upstream_reference.py
ran upstream's dsr_distance and DsrEvaluator, on the CPU in float64, on the features of
spatial_cases.make_case()), and against the reconstruction written out pair by pair."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from spatial_cases import checksum, make_case  # tests/partial, on the path as the test's folder

from fastreid.config import get_cfg
from fastreid.projects.partial import DsrEvaluator, add_partialreid_config, compute_dsr_dist, dsr_distance
from fastreid.projects.partial.dsr_distance import FAR
from fastreid.projects.partial.dsr_evaluation import dsr_metrics

REFERENCE = os.path.join(os.path.dirname(__file__), "data", "upstream_dsr.npz")


@pytest.fixture(scope="module")
def case():
    ref = np.load(REFERENCE)
    c = make_case()
    # a different numpy random stream would give other features, not a wrong implementation
    assert checksum(c) == pytest.approx(ref["checksum"].tolist(), rel=1e-12), "numpy's random stream changed"
    nq = c["num_query"]
    c["feats"] = F.normalize(torch.from_numpy(c["features"]))
    c["spatial_n"] = F.normalize(torch.from_numpy(c["spatial"]))
    c["dist"] = 1 - torch.mm(c["feats"][:nq], c["feats"][nq:].t()).numpy()
    return c, ref


def test_the_dsr_distance_is_upstreams(case):
    c, ref = case
    nq = c["num_query"]
    dsr = compute_dsr_dist(
        c["spatial_n"][:nq], c["spatial_n"][nq:], c["dist"], torch.from_numpy(c["scores"][:nq])
    )
    assert dsr.dtype == np.float64 and dsr.shape == ref["dsr_dist"].shape
    assert np.abs(dsr - ref["dsr_dist"]).max() <= 1e-6  # in fact ~1e-13 (float64 both sides)
    assert (dsr == FAR).sum(axis=1).tolist() == [dsr.shape[1] - 100] * nq  # upstream's top 100


@pytest.mark.parametrize("chunk_bytes", [200_000, 1_000_000])
def test_the_distance_is_the_same_in_small_chunks(case, monkeypatch, chunk_bytes):
    """Galleries in several chunks and (query, gallery) pairs in batches that do not divide a
    chunk's pairs (as a ResNet's 512 channels make them at 256 x 128: the demo's evaluation failed
    with "index 117 is out of bounds" when a batch ran into the next chunk's galleries)."""
    c, ref = case
    nq = c["num_query"]
    monkeypatch.setattr(dsr_distance, "_CHUNK_BYTES", chunk_bytes)
    dsr = compute_dsr_dist(
        c["spatial_n"][:nq], c["spatial_n"][nq:], c["dist"], torch.from_numpy(c["scores"][:nq])
    )
    assert np.abs(dsr - ref["dsr_dist"]).max() <= 1e-6


@pytest.mark.parametrize("dsr_enabled", [True, False])
def test_the_metrics_are_upstreams(case, dsr_enabled):
    c, ref = case
    results, chosen = dsr_metrics(
        c["feats"],
        c["spatial_n"],
        torch.from_numpy(c["scores"]),
        c["pids"],
        c["camids"],
        c["num_query"],
        dsr_enabled,
    )
    names = [str(n) for n in ref["metric_names"]]
    expected = ref["metrics_dsr"] if dsr_enabled else ref["metrics_global"]
    assert [results[n] for n in names] == pytest.approx(expected.tolist(), abs=1e-6)
    assert results["metric"] == pytest.approx((results["mAP"] + results["Rank-1"]) / 2)
    assert (chosen is None) == (not dsr_enabled)


def test_the_reconstruction_pair_by_pair():
    """Each pair's distance is sum_k w_k || G x_k - q_k ||, x_k the ridge solution; galleries of
    another number of positions than the queries; outside the top k the distance is FAR."""
    rng = np.random.default_rng(5)
    q = rng.standard_normal((5, 7, 9))
    g = rng.standard_normal((6, 7, 4))
    w = rng.random((5, 9))
    dist = rng.random((5, 6))
    out = compute_dsr_dist(q, g, dist, w, kappa=0.01, topk=4)
    for i in range(5):
        nearest = set(np.argsort(dist[i])[:4].tolist())
        for j in range(6):
            if j not in nearest:
                assert out[i, j] == FAR
                continue
            gj = g[j]
            x = np.linalg.solve(gj.T @ gj + 0.01 * np.eye(4), gj.T @ q[i])
            expected = (np.linalg.norm(gj @ x - q[i], axis=0) * w[i]).sum()
            assert out[i, j] == pytest.approx(expected, rel=1e-10)


def test_shape_mistakes_are_one_line():
    q, g = np.zeros((2, 3, 4)), np.zeros((3, 5, 4))
    with pytest.raises(ValueError, match="same C"):
        compute_dsr_dist(q, g, np.zeros((2, 3)), np.zeros((2, 4)))
    with pytest.raises(ValueError, match=r"scores must be 2 x 4"):
        compute_dsr_dist(q, np.zeros((3, 3, 4)), np.zeros((2, 3)), np.zeros((2, 5)))


def _cfg(dsr: bool = True):
    cfg = add_partialreid_config(get_cfg())
    cfg.TEST.DSR.ENABLED = dsr
    return cfg


def test_the_evaluator_takes_batches_of_the_heads_triple(case):
    c, ref = case
    ev = DsrEvaluator(_cfg(), c["num_query"])
    feats, spatial, scores = (torch.from_numpy(c[k]).float() for k in ("features", "spatial", "scores"))
    for start in range(0, len(feats), 16):
        sl = slice(start, start + 16)
        inputs = {"targets": torch.from_numpy(c["pids"][sl]), "camids": torch.from_numpy(c["camids"][sl])}
        ev.process(inputs, (feats[sl], spatial[sl], scores[sl]))
    results = ev.evaluate()
    expected, chosen = dsr_metrics(
        F.normalize(feats), F.normalize(spatial), scores, c["pids"], c["camids"], c["num_query"]
    )
    assert results == expected and ev.lambda_ == chosen
    # float32 features: the same numbers as upstream's float64 run here (no ranking changes)
    names = [str(n) for n in ref["metric_names"]]
    assert [results[n] for n in names] == pytest.approx(ref["metrics_dsr"].tolist(), abs=1e-4)


def test_the_evaluator_refuses_a_plain_feature_tensor():
    ev = DsrEvaluator(_cfg(), 1)
    with pytest.raises(TypeError, match="MODEL.HEADS.NAME DSRHead"):
        ev.process({"targets": torch.zeros(2), "camids": torch.zeros(2)}, torch.zeros(2, 4))
