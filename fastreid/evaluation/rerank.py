"""Re-ranking for evaluation (``TEST.RERANK``), at upstream's path: the classic k-reciprocal
re-ranking (:func:`re_ranking`, upstream's function, and :func:`re_ranking_features`, the same from
features without any ``N x N`` matrix) and the method switch of ``TEST.RERANK.METHOD``
(:func:`rerank_features`).

Two methods:

- ``"knn_jaccard"`` (default): upstream FastReID's ``ReidEvaluator`` — its kNN Jaccard distance
  combined with the plain ``TEST.METRIC`` distance, ``(1 - lambda) * jaccard + lambda * dist``
  (:func:`fastreid.utils.kreciprocal.re_ranking_knn_jaccard`, next to upstream's
  ``compute_jaccard_distance`` in ``fastreid.utils.compute_dist``). Reproduces upstream's numbers.
- ``"k_reciprocal"``: Zhong et al. (CVPR 2017, the ``person-re-ranking`` code and upstream's
  ``re_ranking``): ``k1 + 1`` neighbours, weights ``exp(-d^2 / row max of d^2)``, combined with the
  row-normalised squared distance.

The neighbour pass and the sparse Jaccard rows both methods share are in
:mod:`fastreid.utils.kreciprocal` (see there for the memory argument and the tie rule).
"""

from __future__ import annotations

import numpy as np
import torch

from fastreid.config.validate import RERANK_METHODS
from fastreid.utils.kreciprocal import re_ranking_knn_jaccard
from fastreid.utils.kreciprocal.neighbours import (
    FeatureNeighbours,
    MatrixNeighbours,
    check_k,
    neighbours_kept,
    rerank_inputs,
)
from fastreid.utils.kreciprocal.sparse_jaccard import encode, jaccard_rows
from fastreid.utils.pairwise import as_float_tensor

__all__ = [
    "RERANK_METHODS",
    "jaccard_distance",
    "re_ranking",
    "re_ranking_features",
    "re_ranking_knn_jaccard",
    "rerank_features",
]


def re_ranking(
    q_g_dist: np.ndarray,
    q_q_dist: np.ndarray,
    g_g_dist: np.ndarray,
    k1: int = 20,
    k2: int = 6,
    lambda_value: float = 0.3,
) -> np.ndarray:
    """The classic signature: distance matrices in, re-ranked query x gallery distances out (float32).

    Reads the matrices one block of rows at a time; no ``N x N`` matrix is built.
    """
    q_g = np.asarray(q_g_dist, dtype=np.float32)
    q_q = np.asarray(q_q_dist, dtype=np.float32)
    g_g = np.asarray(g_g_dist, dtype=np.float32)
    nq, ng = q_g.shape
    if q_q.shape != (nq, nq) or g_g.shape != (ng, ng):
        raise ValueError(
            f"re_ranking expects q_g ({nq}x{ng}), q_q ({nq}x{nq}) and g_g ({ng}x{ng}) distance matrices; "
            f"got {q_g.shape}, {q_q.shape}, {g_g.shape}"
        )
    check_k(k1, k2, nq + ng)
    nb = MatrixNeighbours(q_g, q_q, g_g, k=neighbours_kept(k1, k2))
    indptr, indices, data = encode(nb, k1, k2)
    out = np.array(q_g, dtype=np.float32, copy=True)  # the caller's matrix stays untouched
    return jaccard_rows(indptr, indices, data, nq, nq + ng, combine=(out, nb.rowmax2[:nq], lambda_value))


@torch.no_grad()
def re_ranking_features(
    query_feat,
    gallery_feat,
    k1: int = 20,
    k2: int = 6,
    lambda_value: float = 0.3,
    metric: str = "euclidean",
) -> np.ndarray:
    """Re-ranked query x gallery distances (float32) from features, equal to
    ``re_ranking(build_dist(q, g, metric), build_dist(q, q, metric), build_dist(g, g, metric), ...)``
    without building those matrices: memory is O(N * k) plus the query x gallery output."""
    qf, gf = rerank_inputs(query_feat, gallery_feat, k1, k2, metric)
    nq = qf.shape[0]
    nb = FeatureNeighbours([qf, gf], metric, k=neighbours_kept(k1, k2), keep_rows=nq, keep_from=nq)
    indptr, indices, data = encode(nb, k1, k2)
    qg, rowmax2_q = nb.kept, nb.rowmax2[:nq]
    del nb  # its copy of the features is no longer needed
    return jaccard_rows(indptr, indices, data, nq, nq + gf.shape[0], combine=(qg, rowmax2_q, lambda_value))


@torch.no_grad()
def jaccard_distance(feat_1, feat_2, k1: int = 20, k2: int = 6, metric: str = "euclidean") -> np.ndarray:
    """The k-reciprocal Jaccard distance alone (``lambda_value = 0``) between two feature sets."""
    f1, f2 = as_float_tensor(feat_1, "feat_1"), as_float_tensor(feat_2, "feat_2")
    check_k(k1, k2, f1.shape[0] + f2.shape[0])
    nb = FeatureNeighbours([f1, f2], metric, k=neighbours_kept(k1, k2))
    indptr, indices, data = encode(nb, k1, k2)
    return jaccard_rows(indptr, indices, data, f1.shape[0], f1.shape[0] + f2.shape[0])


def rerank_features(
    query_feat,
    gallery_feat,
    k1: int = 20,
    k2: int = 6,
    lambda_value: float = 0.3,
    metric: str = "cosine",
    method: str = "knn_jaccard",
) -> np.ndarray:
    """Re-ranked query x gallery distances by ``method`` (``TEST.RERANK.METHOD``): ``"knn_jaccard"``
    (:func:`re_ranking_knn_jaccard`) or ``"k_reciprocal"`` (:func:`re_ranking_features`)."""
    if method == "knn_jaccard":
        return re_ranking_knn_jaccard(query_feat, gallery_feat, k1, k2, lambda_value, metric=metric)
    if method == "k_reciprocal":
        return re_ranking_features(query_feat, gallery_feat, k1, k2, lambda_value, metric=metric)
    raise ValueError(
        f"Unknown re-ranking method {method!r}; TEST.RERANK.METHOD must be one of {RERANK_METHODS}"
    )
