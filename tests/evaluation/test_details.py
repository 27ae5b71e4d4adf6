"""Per-query evaluation details: top-k, first true match, histograms, ROC, saved and loaded."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fastreid.evaluation.details import HIST_BINS, EvaluationDetails, compute_details
from fastreid.evaluation.rank import evaluate_rank
from fastreid.utils.pairwise import iter_dist_chunks


def _data(nq=12, ng=60, ids=6, dim=8, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(ids, dim))
    q_pids, g_pids = rng.integers(0, ids, nq), rng.integers(0, ids, ng)
    q_cams, g_cams = rng.integers(0, 3, nq), rng.integers(0, 3, ng)
    qf = torch.from_numpy(centres[q_pids] + 0.8 * rng.normal(size=(nq, dim))).float()
    gf = torch.from_numpy(centres[g_pids] + 0.8 * rng.normal(size=(ng, dim))).float()
    return qf, gf, q_pids, g_pids, q_cams, g_cams


@pytest.mark.parametrize("metric", ["euclidean", "cosine"])
@pytest.mark.parametrize("chunk_rows", [5, None])
def test_details_agree_with_a_brute_force_ranking(metric, chunk_rows):
    qf, gf, q_pids, g_pids, q_cams, g_cams = _data()
    dist = np.concatenate([d.numpy() for _, _, d in iter_dist_chunks(qf, gf, metric)])
    cmc, ap, _ = evaluate_rank(dist, q_pids, g_pids, q_cams, g_cams)
    details = compute_details(
        iter_dist_chunks(qf, gf, metric, chunk_rows=chunk_rows),
        qf, gf, q_pids, g_pids, q_cams, g_cams,
        [f"q{i}.jpg" for i in range(len(qf))], [f"g{i}.jpg" for i in range(len(gf))],
        ap, cmc, metric, k=5,
    )  # fmt: skip
    for i in range(len(qf)):
        keep = ~((g_pids == q_pids[i]) & (g_cams == q_cams[i]))
        order = np.flatnonzero(keep)[np.argsort(dist[i, keep], kind="stable")]
        np.testing.assert_array_equal(details.topk_index[i], order[:5])
        np.testing.assert_allclose(details.topk_dist[i], dist[i, order[:5]], rtol=1e-6)
        matches = np.flatnonzero(g_pids[order] == q_pids[i])
        assert details.first_match[i] == (matches[0] if len(matches) else -1)
    # Rank-1 from the first matches is the evaluator's
    assert np.mean(details.first_match == 0) == pytest.approx(cmc[0])
    valid = ~((g_pids[None] == q_pids[:, None]) & (g_cams[None] == q_cams[:, None]))
    pos = valid & (g_pids[None] == q_pids[:, None])
    assert details.pos_hist.sum() == pos.sum() and details.neg_hist.sum() == (valid & ~pos).sum()
    assert len(details.hist_edges) == HIST_BINS + 1


def test_roc_runs_from_nothing_to_everything_accepted():
    qf, gf, q_pids, g_pids, q_cams, g_cams = _data(seed=1)
    details = compute_details(
        iter_dist_chunks(qf, gf, "cosine"), qf, gf, q_pids, g_pids, q_cams, g_cams,
        ["q"] * len(qf), ["g"] * len(gf), np.zeros(len(qf)), np.zeros(5), "cosine",
    )  # fmt: skip
    fpr, tpr, thresholds = details.roc()
    assert fpr[0] == tpr[0] == 0 and fpr[-1] == pytest.approx(1) and tpr[-1] == pytest.approx(1)
    assert np.all(np.diff(fpr) >= 0) and np.all(np.diff(tpr) >= 0) and len(thresholds) == len(fpr)
    # true matches are nearer than false ones on these clustered features
    area = float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2))
    assert area > 0.7


def test_a_query_without_a_true_match_and_a_tiny_gallery():
    qf = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    gf = torch.tensor([[1.0, 0.1], [0.1, 1.0], [0.5, 0.5]])
    details = compute_details(
        iter_dist_chunks(qf, gf, "euclidean"), qf, gf,
        np.array([0, 7]), np.array([0, 1, 0]), np.array([0, 0]), np.array([1, 1, 0]),
        ["a", "b"], ["x", "y", "z"], np.array([1.0, 0.0]), np.array([0.5, 1.0, 1.0]), "euclidean", k=10,
    )  # fmt: skip
    assert details.topk_index.shape == (2, 3)  # k is at most the gallery size
    assert details.first_match.tolist() == [0, -1]
    assert details.topk_index[1].tolist() == [1, 2, 0]


def test_saved_details_load_back_equal(tmp_path):
    qf, gf, q_pids, g_pids, q_cams, g_cams = _data(seed=2)
    details = compute_details(
        iter_dist_chunks(qf, gf, "cosine"), qf, gf, q_pids, g_pids, q_cams, g_cams,
        [f"q/{i}.jpg" for i in range(len(qf))], [f"g/{i}.jpg" for i in range(len(gf))],
        np.linspace(0, 1, len(qf)), np.linspace(0.5, 1, 10), "cosine",
    )  # fmt: skip
    path = details.save(str(tmp_path / "d.npz"))
    again = EvaluationDetails.load(path)
    assert again.metric == "cosine" and again.q_paths == details.q_paths and again.g_paths == details.g_paths
    for name, value in vars(details).items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(getattr(again, name), value, err_msg=name)
    assert not list(tmp_path.glob("*.tmp.*"))
