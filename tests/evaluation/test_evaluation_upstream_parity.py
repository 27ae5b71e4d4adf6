"""Differential tests against numbers computed by upstream FastReID's own code, and by
cluster-contrast-reid's (whose ``compute_jaccard_distance`` upstream's copies).

``data/upstream_knn_jaccard.npz`` was written by ``data/make_upstream_reference.py`` running upstream's
``compute_jaccard_distance`` / ``build_dist`` / ``eval_market1501`` (see that script's docstring);
``data/cluster_contrast_reference.npz`` by ``data/make_cluster_contrast_reference.py`` running
cluster-contrast-reid's ``compute_jaccard_distance`` (the ClusterContrast family's pseudo labels
and memory are checked against the same file in ``tests/uda``).
"""

import os

import numpy as np
import pytest
import torch
from knn_conditioning import MIN_GAP, match_ordering_gap, neighbour_rank_gap

from fastreid.config import get_cfg
from fastreid.evaluation import ReidEvaluator, evaluate_rank, evaluate_roc
from fastreid.evaluation.rank import eval_market1501, evaluate_py
from fastreid.evaluation.rerank import re_ranking, re_ranking_knn_jaccard
from fastreid.utils.compute_dist import build_dist, compute_jaccard_distance

DATA = os.path.join(os.path.dirname(__file__), "data", "upstream_knn_jaccard.npz")
CLUSTER_CONTRAST = os.path.join(os.path.dirname(__file__), "data", "cluster_contrast_reference.npz")


@pytest.fixture(scope="module")
def ref():
    with np.load(DATA) as d:
        return {k: d[k] for k in d.files}


@pytest.fixture(scope="module")
def cc_ref():
    with np.load(CLUSTER_CONTRAST) as d:
        return {k: d[k] for k in d.files}


def test_reference_data_are_out_of_reach_of_float32_rounding(ref):
    """No neighbour rank or true/false-match ordering the recorded numbers depend on is close
    enough to a tie for another CPU's float32 rounding to tip it (see knn_conditioning)."""
    nq = int(ref["num_query"])
    split = (ref["pids"][:nq], ref["pids"][nq:], ref["camids"][:nq], ref["camids"][nq:])
    assert neighbour_rank_gap(ref["feats"]) >= MIN_GAP
    for metric in ("euclidean", "cosine"):
        assert match_ordering_gap(ref[f"rerank_{metric}"], *split) >= MIN_GAP, metric


@pytest.mark.parametrize("k1,k2", [(20, 6), (10, 3)])
def test_build_dist_jaccard_matches_upstream(ref, k1, k2):
    f, nq = ref["feats"], int(ref["num_query"])
    got = build_dist(f[:nq], f[nq:], "jaccard", k1=k1, k2=k2)
    np.testing.assert_allclose(got, ref[f"jaccard_qg_k{k1}_{k2}"], atol=1e-6)
    np.testing.assert_allclose(
        compute_jaccard_distance(f, k1=k1, k2=k2), ref[f"jaccard_all_k{k1}_{k2}"], atol=1e-6
    )


@pytest.mark.parametrize("k1,k2", [(30, 6), (20, 6)])
def test_compute_jaccard_distance_matches_cluster_contrast(cc_ref, k1, k2):
    """cluster-contrast-reid's own function on unit features (its neighbours by faiss, its sums in
    float32), at its training settings (30, 6) and its defaults (20, 6)."""
    sizes = [k for a, b in ((30, 6), (20, 6)) for k in (a, int(np.around(a / 2)) + 1, b)]
    assert neighbour_rank_gap(cc_ref["feats"], sizes) >= MIN_GAP
    got = compute_jaccard_distance(cc_ref["feats"], k1=k1, k2=k2)
    np.testing.assert_allclose(got, cc_ref[f"jaccard_k{k1}_{k2}"], atol=1e-6, rtol=0)


@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
def test_reid_evaluator_rerank_matches_upstream(ref, metric, tmp_path):
    f, nq, pids, cams = ref["feats"], int(ref["num_query"]), ref["pids"], ref["camids"]
    dist = re_ranking_knn_jaccard(f[:nq], f[nq:], 20, 6, 0.3, metric=metric)
    np.testing.assert_allclose(dist, ref[f"rerank_{metric}"], rtol=1e-5, atol=1e-5)

    cfg = get_cfg()
    cfg.TEST.METRIC = metric
    cfg.TEST.RERANK.ENABLED = True  # METHOD defaults to upstream's knn_jaccard
    cfg.OUTPUT_DIR = str(tmp_path)
    ev = ReidEvaluator(cfg, nq)
    for s in range(0, len(f), 32):
        ev.process(
            {"targets": torch.from_numpy(pids[s : s + 32]), "camids": torch.from_numpy(cams[s : s + 32])},
            torch.from_numpy(f[s : s + 32]),
        )
    results = ev.evaluate()
    want = ref[f"rerank_{metric}_metrics"] * 100
    got = [results["Rank-1"], results["Rank-5"], results["Rank-10"], results["mAP"], results["mINP"]]
    np.testing.assert_allclose(got, want, atol=1e-4)


def test_upstream_call_signatures_accept_use_cython(ref):
    f, nq, pids, cams = ref["feats"], int(ref["num_query"]), ref["pids"], ref["camids"]
    dist = build_dist(f[:nq], f[nq:], "cosine")
    args = (pids[:nq], pids[nq:], cams[:nq], cams[nq:])
    a = evaluate_rank(dist, *args, 50, False, True)
    b = evaluate_rank(dist, *args, max_rank=50, use_metric_cuhk03=False, use_cython=False)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    s1, l1 = evaluate_roc(dist, *args, True)
    s2, l2 = evaluate_roc(dist, *args, use_cython=False)
    np.testing.assert_array_equal(s1, s2)
    np.testing.assert_array_equal(l1, l2)


def test_re_ranking_ties_are_stable_and_deterministic():
    """Exact ties everywhere (integer features): neighbours ordered by (distance, index), so the result
    does not depend on the order top-k returns them in, and equals a stable-sort dense reference."""
    from tests.evaluation.test_rerank import dense_re_ranking

    g = torch.Generator().manual_seed(3)
    feats = torch.randint(0, 3, (60, 4), generator=g).float()
    qf, gf = feats[:12], feats[12:]
    q_g, q_q, g_g = build_dist(qf, gf), build_dist(qf, qf), build_dist(gf, gf)
    want = dense_re_ranking(q_g, q_q, g_g, 6, 3, 0.3)
    got = re_ranking(q_g, q_q, g_g, 6, 3, 0.3)
    np.testing.assert_allclose(got, want, atol=2e-6)
    np.testing.assert_array_equal(got, re_ranking(q_g, q_q, g_g, 6, 3, 0.3))


@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
def test_eval_market1501_reproduces_upstream_metrics(ref, metric):
    """Upstream's own entry point, called as upstream's ReidEvaluator calls it, on upstream's recorded
    re-ranked distances gives upstream's recorded Rank-1/5/10, mAP and mINP."""
    nq, pids, cams = int(ref["num_query"]), ref["pids"], ref["camids"]
    args = (ref[f"rerank_{metric}"], pids[:nq], pids[nq:], cams[:nq], cams[nq:])
    cmc, all_ap, all_inp = eval_market1501(*args, 50)
    assert isinstance(all_ap, list) and len(all_ap) == nq
    got = [cmc[0], cmc[4], cmc[9], np.mean(all_ap), np.mean(all_inp)]
    np.testing.assert_allclose(got, ref[f"rerank_{metric}_metrics"], atol=1e-6)
    same = evaluate_py(*args, 50, False)
    np.testing.assert_array_equal(same[0], cmc)
    cuhk_cmc, cuhk_map = evaluate_py(*args, 50, True)
    assert cuhk_cmc.shape == cmc.shape and 0.0 < cuhk_map <= 1.0
    assert np.all(np.diff(cuhk_cmc) >= 0)
