"""Sparse k-reciprocal re-ranking against a small dense implementation of the classic algorithm."""

import numpy as np
import pytest
import torch

from fastreid.evaluation.rank import evaluate_rank
from fastreid.evaluation.rerank import jaccard_distance, re_ranking, re_ranking_features
from fastreid.utils.compute_dist import build_dist


def dense_re_ranking(q_g, q_q, g_g, k1=20, k2=6, lambda_value=0.3):
    """Zhong et al.'s dense algorithm (N x N matrices), written plainly as the reference."""
    original = np.concatenate(
        [np.concatenate([q_q, q_g], axis=1), np.concatenate([q_g.T, g_g], axis=1)], axis=0
    )
    original = np.power(original, 2).astype(np.float32)
    original = np.transpose(original / np.max(original, axis=0))
    n, nq = original.shape[0], q_g.shape[0]
    V = np.zeros_like(original, dtype=np.float32)
    initial_rank = np.argsort(original, kind="stable").astype(np.int32)

    def reciprocal(i, k):
        forward = initial_rank[i, : k + 1]
        backward = initial_rank[forward, : k + 1]
        return forward[np.where(backward == i)[0]]

    for i in range(n):
        recip = reciprocal(i, k1)
        expansion = recip
        for candidate in recip:
            cand = reciprocal(candidate, int(np.around(k1 / 2.0)))
            if len(np.intersect1d(cand, recip)) > 2.0 / 3 * len(cand):
                expansion = np.append(expansion, cand)
        expansion = np.unique(expansion)
        weight = np.exp(-original[i, expansion])
        V[i, expansion] = weight / np.sum(weight)
    original = original[:nq]
    if k2 != 1:
        V = np.stack([np.mean(V[initial_rank[i, :k2], :], axis=0) for i in range(n)])
    inv_index = [np.where(V[:, i] != 0)[0] for i in range(n)]
    jaccard = np.zeros_like(original, dtype=np.float32)
    for i in range(nq):
        temp_min = np.zeros((1, n), dtype=np.float32)
        nonzero = np.where(V[i, :] != 0)[0]
        for j in nonzero:
            temp_min[0, inv_index[j]] += np.minimum(V[i, j], V[inv_index[j], j])
        jaccard[i] = 1 - temp_min / (2.0 - temp_min)
    final = jaccard * (1 - lambda_value) + original * lambda_value
    return final[:, nq:]


def clustered(seed, num_q=40, num_g=160, ids=20, dim=24, noise=0.9):
    g = torch.Generator().manual_seed(seed)
    pids = torch.randint(0, ids, (num_q + num_g,), generator=g)
    feats = torch.randn(ids, dim, generator=g)[pids] + noise * torch.randn(num_q + num_g, dim, generator=g)
    cams = torch.randint(0, 4, (num_q + num_g,), generator=g)
    return feats[:num_q], feats[num_q:], pids.numpy(), cams.numpy()


@pytest.mark.parametrize(
    ("seed", "metric", "k1", "k2"),
    [(0, "cosine", 20, 6), (1, "euclidean", 20, 6), (2, "cosine", 7, 1), (3, "euclidean", 5, 3)],
)
def test_same_as_dense_reference(seed, metric, k1, k2, monkeypatch):
    from fastreid.utils.kreciprocal import neighbours, sparse_jaccard

    # small blocks: many upper-triangle blocks, a last block narrower than k
    monkeypatch.setattr(neighbours, "BLOCK_ELEMS", 200 * (13 + seed))
    # small Jaccard blocks (split by output size and by inverted-index pairs) and pair look-ups
    monkeypatch.setattr(sparse_jaccard, "JACCARD_BLOCK_ELEMS", 700 + 300 * seed)
    monkeypatch.setattr(neighbours, "PAIR_BLOCK_ELEMS", 24 * (5 + seed))
    qf, gf, pids, cams = clustered(seed)
    nq = qf.shape[0]
    q_g, q_q, g_g = build_dist(qf, gf, metric), build_dist(qf, qf, metric), build_dist(gf, gf, metric)
    ref = dense_re_ranking(q_g, q_q, g_g, k1, k2, 0.3)
    from_matrices = re_ranking(q_g, q_q, g_g, k1, k2, 0.3)
    from_features = re_ranking_features(qf, gf, k1, k2, 0.3, metric=metric)
    np.testing.assert_allclose(from_matrices, ref, atol=2e-5)
    np.testing.assert_allclose(from_features, ref, atol=2e-5)
    args = (pids[:nq], pids[nq:], cams[:nq], cams[nq:])
    ref_cmc, ref_ap, _ = evaluate_rank(ref, *args)
    cmc, ap, _ = evaluate_rank(from_features, *args)
    assert cmc[0] == ref_cmc[0]
    assert abs(ap.mean() - ref_ap.mean()) < 1e-3


def test_rerank_helps_on_clustered_data_and_jaccard_alone():
    qf, gf, pids, cams = clustered(5, noise=1.3)
    nq = qf.shape[0]
    args = (pids[:nq], pids[nq:], cams[:nq], cams[nq:])
    _, base_ap, _ = evaluate_rank(build_dist(qf, gf, "euclidean"), *args)
    _, rr_ap, _ = evaluate_rank(re_ranking_features(qf, gf, 20, 6, 0.3, "euclidean"), *args)
    assert rr_ap.mean() > base_ap.mean()
    jac = jaccard_distance(qf, gf, 20, 6)
    ref = dense_re_ranking(build_dist(qf, gf), build_dist(qf, qf), build_dist(gf, gf), 20, 6, 0.0)
    np.testing.assert_allclose(jac, ref, atol=2e-5)


def test_bad_arguments():
    with pytest.raises(ValueError, match="q_g"):
        re_ranking(np.zeros((2, 3)), np.zeros((3, 3)), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="k1"):
        re_ranking_features(torch.randn(3, 4), torch.randn(5, 4), k1=0)
    with pytest.raises(ValueError, match="metric"):
        re_ranking_features(torch.randn(3, 4), torch.randn(5, 4), metric="manhattan")
