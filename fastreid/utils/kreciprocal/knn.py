"""Upstream FastReID's re-ranking: its kNN Jaccard distance (``compute_jaccard_distance``) and its
``ReidEvaluator``'s combination with the plain ``TEST.METRIC`` distance."""

from __future__ import annotations

import numpy as np
import torch

from ..pairwise import as_float_tensor
from .neighbours import FeatureNeighbours, check_k, neighbours_kept, rerank_inputs
from .sparse_jaccard import encode, jaccard_graph, jaccard_rows


@torch.no_grad()
def knn_jaccard(feat_1, feat_2, k1: int = 20, k2: int = 6, all_pairs: bool = False) -> np.ndarray:
    """Upstream's kNN Jaccard distance between ``feat_1`` rows and ``feat_2`` rows (float32).

    Neighbours are searched over the union by squared Euclidean distance of the features as given.
    With ``all_pairs`` the result is the ``N x N`` matrix over the union (upstream's
    ``compute_jaccard_distance``); otherwise the ``len(feat_1) x len(feat_2)`` block.
    """
    f1, f2 = as_float_tensor(feat_1, "feat_1"), as_float_tensor(feat_2, "feat_2")
    n1, n = f1.shape[0], f1.shape[0] + f2.shape[0]
    check_k(k1, k2, n)
    nb = FeatureNeighbours([f1, f2], "euclidean", k=neighbours_kept(k1, k2))
    indptr, indices, data = encode(nb, k1, k2, knn_sq_scale=1.0)
    if all_pairs:
        return jaccard_rows(indptr, indices, data, n, n, gallery_start=0, clip=True)
    return jaccard_rows(indptr, indices, data, n1, n, clip=True)


@torch.no_grad()
def knn_jaccard_graph(
    features, k1: int = 20, k2: int = 6, max_distance: float = 1.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The entries at most ``max_distance`` of ``knn_jaccard(features, features[:0], all_pairs=True)``
    (upstream's ``compute_jaccard_distance``), as CSR arrays ``(indptr, indices, distances)`` with
    each row ordered by distance: the same neighbours, encoding and values, bit for bit, without the
    ``N x N`` matrix (:func:`~.sparse_jaccard.jaccard_graph`). Memory is O(N * k) plus the entries
    kept; the neighbour pass is the only part that grows as N^2."""
    f = as_float_tensor(features, "features")
    n = f.shape[0]
    check_k(k1, k2, n)
    nb = FeatureNeighbours([f], "euclidean", k=neighbours_kept(k1, k2))
    indptr, indices, data = encode(nb, k1, k2, knn_sq_scale=1.0)
    del nb
    return jaccard_graph(indptr, indices, data, n, max_distance)


@torch.no_grad()
def re_ranking_knn_jaccard(
    query_feat,
    gallery_feat,
    k1: int = 20,
    k2: int = 6,
    lambda_value: float = 0.3,
    metric: str = "cosine",
) -> np.ndarray:
    """Upstream ``ReidEvaluator``'s re-ranked distances:
    ``(1 - lambda) * knn_jaccard(q, g) + lambda * build_dist(q, g, metric)``, with features
    L2-normalised for the Jaccard part when ``metric`` is cosine (as upstream does). Memory is
    O(N * k) plus the query x gallery output."""
    qf, gf = rerank_inputs(query_feat, gallery_feat, k1, k2, metric)
    nq = qf.shape[0]
    # Cosine neighbours of unit vectors are their Euclidean neighbours, and |a - b|^2 = 2 (1 - cos):
    # one pass gives both upstream's kNN (on normalised features) and its cosine base distance.
    nb = FeatureNeighbours([qf, gf], metric, k=neighbours_kept(k1, k2), keep_rows=nq, keep_from=nq)
    indptr, indices, data = encode(nb, k1, k2, knn_sq_scale=2.0 if metric == "cosine" else 1.0)
    qg = nb.kept
    del nb
    return jaccard_rows(
        indptr, indices, data, nq, nq + gf.shape[0], combine=(qg, None, lambda_value), clip=True
    )
