"""Deep spatial feature reconstruction (DSR) distance (upstream PartialReID's ``dsr_distance``).

A query image's spatial features (``C`` channels at ``m`` positions, each position L2-normalised)
are reconstructed from a gallery image's spatial features by regularised least squares: with
``G`` the gallery's ``C x n`` features and ``q`` one query position,

    x = (G^T G + kappa I)^-1 G^T q,        residual = || G x - q ||

and the DSR distance of the pair is the sum over the query's positions of the residual times the
position's foreground score (the DSR head's ``mask_weight_norm``; the scores of a query sum to 1).
A partial query needs no alignment: each of its positions finds the gallery positions it is made
of. As upstream, only the ``topk`` (100) galleries nearest to each query by the global distance
are reconstructed; every other pair keeps the distance 100.

Computed in float64 on the CPU, a chunk of gallery images at a time: their projections
``(G^T G + kappa I)^-1 G^T`` (one batched solve, not an inverse) are formed once and applied to
the queries that rank them in their top ``topk``, a batch of (query, gallery) pairs in two batched
matrix products; the working tensors stay around 64 MB whatever the set's size. Upstream computes
the same in float32 on the GPU, pair by pair (tests/partial compares the two in float64: equal
to 1e-6, in fact ~1e-13). Ties in the global distance at the ``topk`` boundary pick the lower gallery index
(a stable sort; upstream's quicksort picks either).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["normalize", "compute_dsr_dist", "KAPPA", "TOPK", "FAR"]

#: The ridge term of the reconstruction (upstream's ``kappa``).
KAPPA = 1e-3
#: Galleries reconstructed per query, the nearest by the global distance (upstream's 100).
TOPK = 100
#: The DSR distance of a pair outside a query's ``TOPK`` (upstream's 100).
FAR = 100.0

#: About how many bytes the float64 working tensors of one step take.
_CHUNK_BYTES = 64 * 2**20


def normalize(nparray: np.ndarray, order: int = 2, axis: int = 0) -> np.ndarray:
    """``nparray`` divided by its ``order``-norm along ``axis`` (plus float32's eps), as upstream."""
    norm = np.linalg.norm(nparray, ord=order, axis=axis, keepdims=True)
    return nparray / (norm + np.finfo(np.float32).eps)


def _tensor(x: Any) -> torch.Tensor:
    return x.detach().cpu() if torch.is_tensor(x) else torch.from_numpy(np.asarray(x))


def compute_dsr_dist(
    array1: Any,
    array2: Any,
    distmat: Any,
    scores: Any,
    *,
    kappa: float = KAPPA,
    topk: int = TOPK,
) -> np.ndarray:
    """DSR distances of queries ``array1`` (``Nq x C x m``) to galleries ``array2`` (``Ng x C x n``),
    reconstructing each query from its ``topk`` nearest galleries under ``distmat`` (``Nq x Ng``),
    its positions weighted by ``scores`` (``Nq x m``). Upstream's signature; numpy arrays or
    tensors. Returns an ``Nq x Ng`` float64 array (:data:`FAR` outside the top ``topk``)."""
    q, g, w = _tensor(array1), _tensor(array2), _tensor(scores).to(torch.float64)
    dist_global = np.asarray(distmat.detach().cpu() if torch.is_tensor(distmat) else distmat)
    if q.dim() != 3 or g.dim() != 3 or q.shape[1] != g.shape[1]:
        raise ValueError(
            "compute_dsr_dist: spatial features must be N x C x positions with the same C for query and "
            f"gallery; got {tuple(q.shape)} and {tuple(g.shape)}"
        )
    num_q, num_g = q.shape[0], g.shape[0]
    if dist_global.shape != (num_q, num_g):
        raise ValueError(f"compute_dsr_dist: distmat must be {num_q} x {num_g}; got {dist_global.shape}")
    if tuple(w.shape) != (num_q, q.shape[2]):
        raise ValueError(
            f"compute_dsr_dist: scores must be {num_q} x {q.shape[2]} (one per query position); got {tuple(w.shape)}"
        )
    dist = torch.full((num_q, num_g), FAR, dtype=torch.float64)
    k = min(int(topk), num_g)
    if num_q == 0 or k <= 0:
        return dist.numpy()
    nearest = torch.from_numpy(np.argsort(dist_global, axis=1, kind="stable")[:, :k].copy())
    pair_q = torch.arange(num_q).repeat_interleave(k)
    pair_g = nearest.flatten()
    by_gallery = torch.argsort(pair_g, stable=True)
    pair_q, pair_g = pair_q[by_gallery], pair_g[by_gallery]
    channels, n, m = g.shape[1], g.shape[2], q.shape[2]
    ridge = kappa * torch.eye(n, dtype=torch.float64)
    galleries_per_chunk = max(1, _CHUNK_BYTES // (2 * channels * n * 8))
    pairs_per_batch = max(1, _CHUNK_BYTES // (8 * channels * (2 * n + 2 * m)))
    for g0 in range(0, num_g, galleries_per_chunk):
        g1 = min(num_g, g0 + galleries_per_chunk)
        lo, hi = (int(torch.searchsorted(pair_g, v)) for v in (g0, g1))
        if lo == hi:
            continue
        gs = g[g0:g1].to(torch.float64)  # B x C x n
        gt = gs.transpose(1, 2)
        projection = torch.linalg.solve(gt @ gs + ridge, gt)  # B x n x C: (G^T G + kappa I)^-1 G^T
        for p0 in range(lo, hi, pairs_per_batch):
            p1 = min(
                hi, p0 + pairs_per_batch
            )  # this chunk's pairs only: the next chunk's galleries are not in gs
            qi, gj = pair_q[p0:p1], pair_g[p0:p1]
            qs = q[qi].to(torch.float64)  # P x C x m
            residual = gs[gj - g0] @ (projection[gj - g0] @ qs) - qs
            dist[qi, gj] = (residual.norm(dim=1) * w[qi]).sum(dim=1)
    return dist.numpy()
