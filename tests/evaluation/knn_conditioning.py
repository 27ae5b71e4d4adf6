"""How far the recorded re-ranking data stay from a tie that float32 rounding could break.

The k-reciprocal re-ranking reads ranks: who is among a sample's k nearest neighbours (k = k1 + 1,
round(k1 / 2) + 1 and k2), and the evaluation orders true against false matches by the final
distances. Distances computed in
float32 differ by ~1e-7 of their magnitude between CPUs (another BLAS kernel, another summation
order), so two neighbours closer than that at a rank boundary can swap on another machine and the
recorded upstream numbers stop matching. The data in ``data/upstream_knn_jaccard.npz`` were drawn
(the seed chosen by ``data/make_upstream_reference.py``) so that every such gap is at least
``MIN_GAP`` of the row's largest distance, 100x the rounding; the tests check that it still holds.

numpy only, so the generator can import it with upstream's package on the path.
"""

from __future__ import annotations

import numpy as np

MIN_GAP = 1e-5
# (k1, k2) settings the reference records; the rank boundaries they read
SETTINGS = ((20, 6), (10, 3))


def rank_boundaries(settings=SETTINGS) -> list[int]:
    """Sorted positions p (self at 0) where the neighbour at p is in a top-k list and p + 1 is not."""
    ks = {k for k1, k2 in settings for k in (k1 + 1, int(np.around(k1 / 2)) + 1, k2)}
    return sorted(k - 1 for k in ks)


def _squared_distances(feats: np.ndarray, cosine: bool) -> np.ndarray:
    x = feats.astype(np.float64)
    if cosine:
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
    sq = (x * x).sum(axis=1)
    return sq[:, None] + sq[None, :] - 2 * x @ x.T


def neighbour_rank_gap(feats: np.ndarray, list_sizes=None) -> float:
    """Smallest gap, relative to its row's largest distance, between the neighbours on either side
    of a rank boundary, for Euclidean and cosine neighbours (computed in float64). ``list_sizes``:
    the neighbour list lengths read (default: those of ``SETTINGS``, see :func:`rank_boundaries`)."""
    worst = np.inf
    boundaries = rank_boundaries() if list_sizes is None else sorted(k - 1 for k in set(list_sizes))
    for cosine in (False, True):
        ordered = np.sort(_squared_distances(feats, cosine), axis=1)
        scale = np.abs(ordered).max(axis=1)
        for p in boundaries:
            worst = min(worst, float(((ordered[:, p + 1] - ordered[:, p]) / scale).min()))
    return worst


def match_ordering_gap(
    dist: np.ndarray, q_pids: np.ndarray, g_pids: np.ndarray, q_camids: np.ndarray, g_camids: np.ndarray
) -> float:
    """Smallest gap, relative to its row's largest distance, between a true and a false match next
    to each other in a query's ranking (the gallery entries Market-1501's protocol keeps: not the
    same identity from the same camera). Only such a pair changes CMC or mAP when it swaps."""
    worst = np.inf
    for i in range(dist.shape[0]):
        keep = ~((g_pids == q_pids[i]) & (g_camids == q_camids[i]))
        row, match = dist[i, keep].astype(np.float64), g_pids[keep] == q_pids[i]
        order = np.argsort(row, kind="stable")
        row, match = row[order], match[order]
        differs = match[1:] != match[:-1]
        if differs.any():
            worst = min(worst, float((np.diff(row)[differs] / np.abs(row).max()).min()))
    return worst
