"""Average query expansion and ROC on tiny known cases; streaming TPR@FPR against the full ROC."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fastreid.evaluation.query_expansion import aqe
from fastreid.evaluation.roc import evaluate_roc, roc_curve, tpr_at_fpr


def test_aqe_known_case():
    # two tight pairs; with qe_k=2 each item becomes the weighted mean of itself and its partner
    q = torch.tensor([[1.0, 0.0], [-1.0, 0.0]])
    g = torch.tensor([[0.8, 0.6], [-0.8, -0.6]])
    new_q, new_g = aqe(q, g, qe_times=1, qe_k=2, alpha=1.0)
    c = 0.8  # cosine of each pair
    np.testing.assert_allclose(new_q[0], (q[0] * 1.0 + g[0] * c) / 2, atol=1e-6)
    np.testing.assert_allclose(new_q[1], (q[1] * 1.0 + g[1] * c) / 2, atol=1e-6)
    np.testing.assert_allclose(new_g[0], (g[0] * 1.0 + q[0] * c) / 2, atol=1e-6)
    np.testing.assert_allclose(new_g[1], (g[1] * 1.0 + q[1] * c) / 2, atol=1e-6)
    assert new_q.shape == q.shape and new_g.shape == g.shape


def loop_aqe(q, g, qe_times, qe_k, alpha):
    """Upstream's per-row loop (argpartition), as reference."""
    n_q = q.shape[0]
    feats = torch.cat([q, g]).numpy()
    normed = F.normalize(torch.from_numpy(feats), dim=1)
    for _ in range(qe_times):
        sims = (normed @ normed.t()).numpy()
        rows = []
        for sim in sims:
            top = np.argpartition(-sim, range(1, qe_k + 1))[:qe_k]
            rows.append(np.mean(feats[top] * np.power(sim[top], alpha)[:, None], axis=0))
        feats = np.stack(rows)
        normed = F.normalize(torch.from_numpy(feats), dim=1)
    return feats[:n_q], feats[n_q:]


def test_aqe_matches_loop_reference():
    g = torch.Generator().manual_seed(0)
    q, gal = torch.randn(7, 5, generator=g), torch.randn(20, 5, generator=g)
    ref_q, ref_g = loop_aqe(q, gal, 2, 4, 3.0)
    new_q, new_g = aqe(q, gal, qe_times=2, qe_k=4, alpha=3.0)
    np.testing.assert_allclose(new_q.numpy(), ref_q, atol=1e-5)
    np.testing.assert_allclose(new_g.numpy(), ref_g, atol=1e-5)
    with pytest.raises(ValueError, match="QE_K"):
        aqe(q, gal, qe_k=0)


def test_roc_curve_known_case():
    # scikit-learn's documented example, labels 0/1
    fpr, tpr, thr = roc_curve(np.array([0, 0, 1, 1]), np.array([0.1, 0.4, 0.35, 0.8]))
    np.testing.assert_allclose(fpr, [0, 0, 0.5, 0.5, 1])
    np.testing.assert_allclose(tpr, [0, 0.5, 0.5, 1, 1])
    np.testing.assert_allclose(thr, [np.inf, 0.8, 0.4, 0.35, 0.1])


def test_evaluate_roc_tiny():
    dist = np.array([[0.1, 0.5, 0.9, 0.3]], np.float32)
    g_pids, g_cams = np.array([7, 7, 2, 3]), np.array([1, 0, 1, 1])
    scores, labels = evaluate_roc(dist, np.array([7]), g_pids, np.array([0]), g_cams)
    # gallery item 1 (same pid, same camera) is junk; item 0 is the only true match
    np.testing.assert_allclose(scores, [0.1, 0.9, 0.3])
    np.testing.assert_array_equal(labels, [0, 1, 1])


def upstream_tpr(scores, labels, target):
    fprs, tprs, _ = roc_curve(labels, scores)
    return tprs[np.argmin(np.abs(fprs - target))]


@pytest.mark.parametrize("seed", range(3))
def test_streaming_tpr_equals_full_roc(seed):
    rng = np.random.default_rng(seed)
    nq, ng = 60, 400
    q_pids, g_pids = rng.integers(0, 30, nq), rng.integers(0, 30, ng)
    q_cams, g_cams = rng.integers(0, 3, nq), rng.integers(0, 3, ng)
    dist = rng.random((nq, ng)).astype(np.float32) - 0.4 * (q_pids[:, None] == g_pids[None, :])
    scores, labels = evaluate_roc(dist, q_pids, g_pids, q_cams, g_cams)
    fprs = (1e-3, 1e-2, 0.05, 0.3)
    got = tpr_at_fpr(dist, q_pids, g_pids, q_cams, g_cams, fprs)
    for target in fprs:
        assert got[target] == pytest.approx(upstream_tpr(scores, labels, target), abs=1e-9)
