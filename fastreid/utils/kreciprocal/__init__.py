"""k-reciprocal re-ranking (Zhong et al., CVPR 2017) and upstream FastReID's kNN Jaccard distance,
from nearest neighbours and sparse rows.

The classic implementation builds several dense ``N x N`` matrices over queries + gallery (``N`` items):
about 10 GB at Market-1501 scale and beyond a 24 GB machine at MSMT17 scale. Every quantity it uses is
sparse or local, though:

- the k-reciprocal sets only need each item's ``k1 + 1`` nearest neighbours (and the row maximum used
  to normalise distances);
- the encoding ``V`` has a few dozen non-zeros per row (the expanded reciprocal set);
- the query expansion averages ``k2`` such rows;
- the Jaccard distance between a query and a gallery item only involves the columns both rows share,
  found through an inverted index over gallery rows.

This module computes exactly those pieces: one chunked pass of distance rows (matmul + top-k, never more
than a chunk of distances in memory), then vectorised work on ``N x k``-sized arrays. The result is the
classic ``re_ranking`` output (same formula and normalisation); only exact distance ties may be ordered
differently, and sums run in another order (differences around 1e-7).

Entry points (the first two in :mod:`fastreid.evaluation.rerank`):
- :func:`re_ranking` keeps the classic signature (query-gallery, query-query, gallery-gallery distance
  matrices), for user scripts that already hold them;
- :func:`re_ranking_features` starts from features and never builds any ``N x N`` matrix;
- :func:`knn_jaccard` is upstream's ``compute_jaccard_distance`` (``fastreid/utils/compute_dist.py``
  there): the same sets, but from the ``k1`` nearest neighbours (self included), weights
  ``softmax(-squared distance)`` without row normalisation, negative values clipped to 0;
- :func:`knn_jaccard_graph` is the same distance as a sparse graph: only the entries at most a
  threshold (DBSCAN's ``eps``), bit for bit the dense function's, for clustering at scale;
- :func:`re_ranking_knn_jaccard` is upstream's ``ReidEvaluator`` re-ranking:
  ``(1 - lambda) * knn_jaccard + lambda * dist`` with ``dist`` the plain ``TEST.METRIC`` distance.

Ties: neighbours are ordered by distance, then by item index (queries first, then gallery): a
stable sort. :func:`re_ranking` (whole matrices given) applies that rule exactly, as a stable
``argsort`` of each row would. The feature paths keep the ``2 (k1 + 1)`` nearest items per row found
by top-k, then order them by that rule; only when more items tie exactly at that boundary than fit
is the choice among them top-k's (still the same on every run for the same input).

Modules: ``neighbours`` (the neighbour pass, from features or from matrices), ``sparse_jaccard`` (the
sets, their sparse encoding and the Jaccard rows, shared by both methods) and ``knn`` (upstream's kNN
Jaccard). The classic method's entry points (:func:`re_ranking`, :func:`re_ranking_features`) live at
upstream's path, :mod:`fastreid.evaluation.rerank`, which builds on these modules.
"""

from __future__ import annotations

from .knn import knn_jaccard, knn_jaccard_graph, re_ranking_knn_jaccard

__all__ = ["knn_jaccard", "knn_jaccard_graph", "re_ranking_knn_jaccard"]
