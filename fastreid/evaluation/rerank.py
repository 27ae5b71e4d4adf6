"""Re-ranking for evaluation (``TEST.RERANK``); the algorithms live in :mod:`fastreid.utils.kreciprocal`.

Two methods (``TEST.RERANK.METHOD``):

- ``"knn_jaccard"`` (default): upstream FastReID's ``ReidEvaluator`` — its kNN Jaccard distance
  combined with the plain ``TEST.METRIC`` distance, ``(1 - lambda) * jaccard + lambda * dist``.
  Reproduces upstream's re-ranked numbers.
- ``"k_reciprocal"``: the classic k-reciprocal re-ranking of Zhong et al. (CVPR 2017, the
  ``person-re-ranking`` code and upstream's ``re_ranking`` function): ``k1 + 1`` neighbours, weights
  from row-normalised squared distances, combined with the row-normalised squared distance.
"""

from __future__ import annotations

import numpy as np

from fastreid.utils.kreciprocal import (
    RERANK_METHODS,
    jaccard_distance,
    knn_jaccard,
    re_ranking,
    re_ranking_features,
    re_ranking_knn_jaccard,
)

__all__ = [
    "RERANK_METHODS",
    "jaccard_distance",
    "knn_jaccard",
    "re_ranking",
    "re_ranking_features",
    "re_ranking_knn_jaccard",
    "rerank_features",
]


def rerank_features(
    query_feat,
    gallery_feat,
    k1: int = 20,
    k2: int = 6,
    lambda_value: float = 0.3,
    metric: str = "cosine",
    method: str = "knn_jaccard",
) -> np.ndarray:
    """Re-ranked query x gallery distances by ``method`` (see the module docstring)."""
    if method == "knn_jaccard":
        return re_ranking_knn_jaccard(query_feat, gallery_feat, k1, k2, lambda_value, metric=metric)
    if method == "k_reciprocal":
        return re_ranking_features(query_feat, gallery_feat, k1, k2, lambda_value, metric=metric)
    raise ValueError(
        f"Unknown re-ranking method {method!r}; TEST.RERANK.METHOD must be one of {RERANK_METHODS}"
    )
