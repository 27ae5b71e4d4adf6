"""Distances between feature sets, whole or in row chunks (upstream's ``fastreid.utils.compute_dist``).

Formulas follow upstream so numbers match:

- ``"euclidean"``: the *squared* Euclidean distance ``|a|^2 + |b|^2 - 2 a.b`` (no square root, may be
  slightly negative from rounding), as upstream returns it;
- ``"cosine"``: ``1 - cos(a, b)`` computed on L2-normalised rows;
- ``"jaccard"``: upstream's kNN Jaccard distance (``compute_jaccard_distance``; the algorithm is in
  :mod:`fastreid.utils.kreciprocal`).

Lives in ``utils`` (upstream's import path); ``fastreid.evaluation`` imports it, never the reverse.
"""

from __future__ import annotations

import numpy as np
import torch

from .kreciprocal import knn_jaccard
from .pairwise import (
    ArrayLike,
    as_float_tensor,
    check_metric,
    dist_rows,
    distance_dtype,
    gallery_scale,
    prepare,
)

__all__ = [
    "build_dist",
    "compute_cosine_distance",
    "compute_euclidean_distance",
    "compute_jaccard_distance",
    "k_reciprocal_neigh",
]


@torch.no_grad()
def build_dist(feat_1: ArrayLike, feat_2: ArrayLike, metric: str = "euclidean", **kwargs) -> np.ndarray:
    """Distance matrix (numpy, ``len(feat_1) x len(feat_2)``), upstream's ``build_dist``: float64 for
    float64 features and float32 otherwise (half-precision features are computed in float32, where
    upstream keeps float16; :func:`fastreid.utils.pairwise.distance_dtype`).

    ``metric="jaccard"`` takes ``k1`` and ``k2`` keyword arguments (defaults 20 and 6) and returns
    upstream's kNN Jaccard distance between the two sets (neighbours searched over their union by
    squared Euclidean distance of the features as given; normalise them first for cosine, as
    upstream's evaluator does), float32 whatever the input, as upstream's.
    """
    check_metric(metric)
    dtype = torch.float32 if metric == "jaccard" else distance_dtype(feat_1, feat_2)
    f1, f2 = as_float_tensor(feat_1, "feat_1", dtype), as_float_tensor(feat_2, "feat_2", dtype)
    if f1.shape[1] != f2.shape[1]:
        raise ValueError(f"feature dims differ: {f1.shape[1]} vs {f2.shape[1]}")
    if metric == "jaccard":
        return knn_jaccard(f1, f2, k1=kwargs.get("k1", 20), k2=kwargs.get("k2", 6))
    a, a_sq = prepare(f1, metric)
    return dist_rows(a, a_sq, f2, gallery_scale(f2, metric), metric).numpy()


def compute_euclidean_distance(features: ArrayLike, others: ArrayLike) -> np.ndarray:
    """Squared Euclidean distances (upstream's name)."""
    return build_dist(features, others, "euclidean")


def compute_cosine_distance(features: ArrayLike, others: ArrayLike) -> np.ndarray:
    """``1 - cos`` distances (upstream's name)."""
    return build_dist(features, others, "cosine")


def compute_jaccard_distance(
    features: ArrayLike, k1: int = 20, k2: int = 6, search_option: int = 0, fp16: bool = False
) -> np.ndarray:
    """Upstream's ``N x N`` kNN Jaccard distance among ``features``.

    ``search_option`` (upstream's choice of faiss GPU/CPU search) and ``fp16`` are accepted for
    compatibility and ignored: the neighbour search here runs on the CPU in float32 and returns the
    same neighbours.
    """
    f = as_float_tensor(features, "features")
    return knn_jaccard(f, f[:0], k1=k1, k2=k2, all_pairs=True)


def k_reciprocal_neigh(initial_rank: np.ndarray, i: int, k1: int) -> np.ndarray:
    """The k-reciprocal neighbours of sample ``i`` (upstream's helper): those of its ``k1 + 1``
    nearest (``initial_rank[i, :k1 + 1]``, itself included) that also have ``i`` among theirs."""
    forward = initial_rank[i, : k1 + 1]
    backward = initial_rank[forward, : k1 + 1]
    return forward[np.where(backward == i)[0]]
