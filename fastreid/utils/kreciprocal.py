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

Entry points:
- :func:`re_ranking` keeps the classic signature (query-gallery, query-query, gallery-gallery distance
  matrices), for user scripts that already hold them;
- :func:`re_ranking_features` starts from features and never builds any ``N x N`` matrix;
- :func:`knn_jaccard` is upstream's ``compute_jaccard_distance`` (``fastreid/utils/compute_dist.py``
  there): the same sets, but from the ``k1`` nearest neighbours (self included), weights
  ``softmax(-squared distance)`` without row normalisation, negative values clipped to 0;
- :func:`re_ranking_knn_jaccard` is upstream's ``ReidEvaluator`` re-ranking:
  ``(1 - lambda) * knn_jaccard + lambda * dist`` with ``dist`` the plain ``TEST.METRIC`` distance.

Ties: neighbours are ordered by distance, then by item index (queries first, then gallery): a
stable sort. :func:`re_ranking` (whole matrices given) applies that rule exactly, as a stable
``argsort`` of each row would. The feature paths keep the ``2 (k1 + 1)`` nearest items per row found
by top-k, then order them by that rule; only when more items tie exactly at that boundary than fit
is the choice among them top-k's (still the same on every run for the same input).
"""

from __future__ import annotations

import numpy as np
import torch

from .pairwise import as_float_tensor, check_metric, default_chunk_rows

__all__ = [
    "RERANK_METHODS",
    "jaccard_distance",
    "knn_jaccard",
    "re_ranking",
    "re_ranking_features",
    "re_ranking_knn_jaccard",
]

# TEST.RERANK.METHOD values: upstream's evaluator (kNN Jaccard combined with the original distance),
# and the classic k-reciprocal re-ranking.
RERANK_METHODS = ("knn_jaccard", "k_reciprocal")

# Distances per block of rows in the neighbour pass (48 MB of float32); tests lower it.
BLOCK_ELEMS = 12 * 1024 * 1024
# Elements of feature rows gathered at once when looking up pair distances (16 MB of float32).
PAIR_BLOCK_ELEMS = 4 * 1024 * 1024
# Elements of work per block of query rows in the Jaccard pass (output cells or index pairs).
JACCARD_BLOCK_ELEMS = 4_000_000


class _Neighbours:
    """What the algorithm needs from the ``N x N`` distances: per row, the nearest ``K`` items (sorted by
    distance, then index), their distances, the row maximum of squared distances, and any other pair's
    distance on request (``pair_dist``)."""

    idx: np.ndarray  # N x K int64, nearest first (self normally first)
    dist: np.ndarray  # N x K float32, the distances of those neighbours
    rowmax2: np.ndarray  # N float32, row max of squared distances

    def raw_pairs(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def pair_dist(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        """Distances of pairs (i, j): looked up in the neighbour lists when present, else computed."""
        n = self.idx.shape[0]
        if not hasattr(self, "_keys"):
            keys = (np.arange(n, dtype=np.int64)[:, None] * n + self.idx).ravel()
            self._key_order = np.argsort(keys, kind="stable")
            self._keys = keys[self._key_order]
        want = i.astype(np.int64) * n + j
        pos = np.searchsorted(self._keys, want).clip(max=len(self._keys) - 1)
        hit = self._keys[pos] == want
        out = np.empty(len(want), np.float32)
        out[hit] = self.dist.ravel()[self._key_order[pos[hit]]]
        miss = ~hit
        if miss.any():
            out[miss] = self.raw_pairs(i[miss], j[miss]).astype(np.float32)
        return out

    def pair_d2n(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        """Squared distances normalised by the row maximum (the classic algorithm's weights)."""
        d = self.pair_dist(i, j)
        return (d * d) / self.rowmax2[i]


def _stable_rows(dist: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row ordered by (distance, index): a deterministic tie rule whatever top-k returned."""
    order = np.lexsort((idx, dist), axis=-1)
    return np.take_along_axis(dist, order, axis=1), np.take_along_axis(idx, order, axis=1)


def _finish_rows(nb: _Neighbours, vals: list, idxs: list, maxs: list) -> None:
    nb.dist, nb.idx = _stable_rows(np.concatenate(vals).astype(np.float32), np.concatenate(idxs))
    rowmax = np.concatenate(maxs)
    nb.rowmax2 = np.maximum(rowmax[:, 0] * rowmax[:, 0], rowmax[:, 1] * rowmax[:, 1]).astype(np.float32)


class _FeatureNeighbours(_Neighbours):
    """Neighbours from features in one pass over the upper triangle of the ``N x N`` distances.

    Block ``[s:e] x [s:N]`` serves rows ``s:e`` directly and rows ``e:N`` through its transpose, so each
    distance is computed once (half the matmul work of a full pass). Running top-k lists and row
    extremes are merged block by block. Optionally keeps the query x gallery block, the only dense
    output the caller needs. Cosine runs on similarities (larger = nearer, d = 1 - s) to skip a pass.
    """

    @torch.no_grad()
    def __init__(self, parts: list, metric: str, k: int, keep_rows: int = 0, keep_from: int = 0):
        x = torch.cat([as_float_tensor(p) for p in parts])  # the only copy of the features
        if metric == "cosine":
            x.div_(x.norm(p=2, dim=1, keepdim=True).clamp_min(1e-12))  # what F.normalize computes
            self.x_sq = None
        else:
            self.x_sq = x.pow(2).sum(dim=1)
        self.x, self.metric = x, metric
        cos = metric == "cosine"
        n = x.shape[0]
        k = min(k, n)
        self.kept = np.empty((keep_rows, n - keep_from), np.float32) if keep_rows else None
        # Running best lists in "score" space: similarity for cosine (largest), distance otherwise.
        fill = -float("inf") if cos else float("inf")
        best_v = torch.full((n, k), fill)
        best_i = torch.full((n, k), -1, dtype=torch.long)
        hi = torch.full((n,), -float("inf"))  # max score
        lo = torch.full((n,), float("inf"))  # min score
        rows = default_chunk_rows(n, BLOCK_ELEMS)
        for s in range(0, n, rows):
            e = min(s + rows, n)
            block = torch.mm(x[s:e], x[s:].t())
            if not cos:
                assert self.x_sq is not None  # set for every metric but cosine
                block.mul_(-2.0).add_(self.x_sq[s:e, None]).add_(self.x_sq[None, s:])
            if s < keep_rows:
                assert self.kept is not None  # allocated whenever keep_rows > 0
                q = block[: min(e, keep_rows) - s, keep_from - s :]
                self.kept[s : min(e, keep_rows)] = (1.0 - q if cos else q).numpy()
            # rows s:e: this block (columns >= s) and what earlier blocks left (columns < s)
            v, i = torch.topk(block, min(k, n - s), dim=1, largest=cos, sorted=False)
            v, j = torch.topk(torch.cat([best_v[s:e], v], 1), k, dim=1, largest=cos, sorted=True)
            best_v[s:e] = v
            best_i[s:e] = torch.cat([best_i[s:e], i + s], 1).gather(1, j)
            mn, mx = torch.aminmax(block, dim=1)
            hi[s:e] = torch.maximum(hi[s:e], mx)
            lo[s:e] = torch.minimum(lo[s:e], mn)
            if e < n:  # rows e:N see columns s:e through the transpose
                t = block[:, e - s :].t().contiguous()  # one strided copy; then fast row-wise ops
                v, i = torch.topk(t, min(k, e - s), dim=1, largest=cos, sorted=False)
                v, j = torch.topk(torch.cat([best_v[e:], v], 1), k, dim=1, largest=cos, sorted=True)
                best_i[e:] = torch.cat([best_i[e:], i + s], 1).gather(1, j)
                best_v[e:] = v
                mn, mx = torch.aminmax(t, dim=1)
                hi[e:] = torch.maximum(hi[e:], mx)
                lo[e:] = torch.minimum(lo[e:], mn)
            del block
        if cos:  # similarities -> distances d = 1 - s (same float op as build_dist)
            best_v, hi, lo = 1.0 - best_v, 1.0 - lo, 1.0 - hi
        self.dist, self.idx = _stable_rows(best_v.numpy(), best_i.numpy())
        self.rowmax2 = torch.maximum(hi * hi, lo * lo).numpy().astype(np.float32)

    @torch.no_grad()
    def raw_pairs(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        out = np.empty(len(i), np.float32)
        step = max(1, PAIR_BLOCK_ELEMS // max(1, self.x.shape[1]))
        for s in range(0, len(i), step):
            a = torch.from_numpy(i[s : s + step])
            b = torch.from_numpy(j[s : s + step])
            dot = (self.x[a] * self.x[b]).sum(dim=1)
            if self.metric == "cosine":
                out[s : s + step] = (1.0 - dot).numpy()
            else:
                assert self.x_sq is not None
                out[s : s + step] = (self.x_sq[a] + self.x_sq[b] - 2.0 * dot).numpy()
        return out


class _MatrixNeighbours(_Neighbours):
    """Neighbours from the classic three distance matrices, read one block of rows at a time."""

    def __init__(self, q_g: np.ndarray, q_q: np.ndarray, g_g: np.ndarray, k: int):
        self.q_g, self.q_q, self.g_g = q_g, q_q, g_g
        nq, ng = q_g.shape
        n = nq + ng
        k = min(k, n)
        vals, idxs, maxs = [], [], []
        rows = default_chunk_rows(n)
        for s in range(0, n, rows):
            e = min(s + rows, n)
            d = torch.from_numpy(np.ascontiguousarray(self._rows(s, e), dtype=np.float32))
            v, i = torch.sort(d, dim=1, stable=True)  # whole rows are here: ties resolved exactly by index
            v, i = v[:, :k], i[:, :k]
            vals.append(v.numpy())
            idxs.append(i.numpy())
            maxs.append(torch.stack([d.amax(dim=1), d.amin(dim=1)], dim=1).numpy())
        _finish_rows(self, vals, idxs, maxs)

    def _rows(self, s: int, e: int) -> np.ndarray:
        nq = self.q_g.shape[0]
        parts = []
        if s < nq:
            qe = min(e, nq)
            parts.append(np.concatenate([self.q_q[s:qe], self.q_g[s:qe]], axis=1))
        if e > nq:
            gs = max(s, nq) - nq
            ge = e - nq
            parts.append(np.concatenate([self.q_g[:, gs:ge].T, self.g_g[gs:ge]], axis=1))
        return np.concatenate(parts, axis=0)

    def raw_pairs(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        nq = self.q_g.shape[0]
        out = np.empty(len(i), np.float32)
        qi, qj = i < nq, j < nq
        m = qi & qj
        out[m] = self.q_q[i[m], j[m]]
        m = qi & ~qj
        out[m] = self.q_g[i[m], j[m] - nq]
        m = ~qi & qj
        out[m] = self.q_g[j[m], i[m] - nq]
        m = ~qi & ~qj
        out[m] = self.g_g[i[m] - nq, j[m] - nq]
        return out


def _reciprocal_mask(rank: np.ndarray) -> np.ndarray:
    """mask[i, a]: item rank[i, a] also has i among its first ``rank.shape[1]`` neighbours."""
    n = rank.shape[0]
    out = np.empty(rank.shape, bool)
    step = max(1, 4_000_000 // (rank.shape[1] ** 2))
    for s in range(0, n, step):
        r = rank[s : s + step]
        out[s : s + step] = (rank[r] == np.arange(s, s + len(r))[:, None, None]).any(axis=2)
    return out


def _expanded_sets(rank: np.ndarray, k1: int) -> tuple[np.ndarray, np.ndarray]:
    """The k-reciprocal sets, expanded with the candidates' half-size reciprocal sets when those overlap
    the set by more than 2/3 (the paper's rule). Returns padded sorted columns (pad = N) and a mask."""
    n = rank.shape[0]
    half = int(np.around(k1 / 2.0))
    full_rank = rank[:, : k1 + 1]
    half_rank = rank[:, : half + 1]
    recip = _reciprocal_mask(full_rank)
    half_recip = _reciprocal_mask(half_rank)
    recip_cols = np.where(recip, full_rank, -1)
    half_sizes = half_recip.sum(axis=1)
    out_cols = []
    step = max(1, 2_000_000 // (full_rank.shape[1] ** 2 * half_rank.shape[1]))
    for s in range(0, n, step):
        cand = full_rank[s : s + step]  # rows x (k1+1) candidates
        cand_half = np.where(half_recip[cand], half_rank[cand], -2)  # rows x (k1+1) x (h+1)
        inside = (cand_half[..., None] == recip_cols[s : s + step, None, None, :]).any(axis=3)
        overlap = inside.sum(axis=2)
        accept = recip[s : s + step] & (overlap > 2.0 / 3.0 * half_sizes[cand])
        extra = np.where(accept[..., None] & (cand_half >= 0), cand_half, n).reshape(len(cand), -1)
        cols = np.concatenate([np.where(recip[s : s + step], cand, n), extra], axis=1)
        cols.sort(axis=1)
        dup = np.zeros_like(cols, dtype=bool)
        dup[:, 1:] = cols[:, 1:] == cols[:, :-1]
        cols[dup] = n
        cols.sort(axis=1)
        out_cols.append(cols)
    width = max(c.shape[1] for c in out_cols)
    cols = np.concatenate([np.pad(c, ((0, 0), (0, width - c.shape[1])), constant_values=n) for c in out_cols])
    used = int((cols < n).sum(axis=1).max())
    cols = cols[:, :used]
    return cols, cols < n


def _csr_from_padded(cols: np.ndarray, vals: np.ndarray, valid: np.ndarray):
    counts = valid.sum(axis=1)
    indptr = np.zeros(len(cols) + 1, np.int64)
    np.cumsum(counts, out=indptr[1:])
    return indptr, cols[valid].astype(np.int64), vals[valid].astype(np.float32)


def _encode(nb: _Neighbours, k1: int, k2: int, knn_sq_scale: float | None = None):
    """Sparse rows of V (weights of the expanded k-reciprocal sets), then averaged over k2 neighbours.

    Classic (``knn_sq_scale=None``): sets from the ``k1 + 1`` nearest neighbours, weights
    ``exp(-d^2 / row max of d^2)``. Upstream's kNN Jaccard (``knn_sq_scale`` given): sets from the ``k1``
    nearest neighbours, weights ``softmax(-s)`` with ``s`` the squared Euclidean distance, obtained as
    ``knn_sq_scale * d`` from the stored distances (1 for squared Euclidean, 2 for ``1 - cos`` of unit
    vectors)."""
    n = nb.idx.shape[0]
    cols, valid = _expanded_sets(nb.idx if knn_sq_scale is None else nb.idx[:, :k1], k1)
    rows = np.broadcast_to(np.arange(n)[:, None], cols.shape)
    logit = np.zeros(cols.shape, np.float32)
    if knn_sq_scale is None:
        logit[valid] = -nb.pair_d2n(rows[valid], cols[valid])
    else:
        logit[valid] = -np.float32(knn_sq_scale) * nb.pair_dist(rows[valid], cols[valid])
        logit -= np.where(valid, logit, -np.inf).max(axis=1, keepdims=True)  # softmax's shift
    weight = np.where(valid, np.exp(logit), 0.0).astype(np.float32)
    vals = weight / weight.sum(axis=1, keepdims=True, dtype=np.float32)
    if k2 == 1:
        return _csr_from_padded(cols, vals, valid)
    # Query expansion: V_qe[i] = mean of V over i's k2 nearest neighbours (sparse row sums).
    qe_rank = nb.idx[:, :k2]
    indptr_parts, ind_parts, val_parts = [np.zeros(1, np.int64)], [], []
    total = 0
    step = max(1, 2_000_000 // (k2 * cols.shape[1]))
    for s in range(0, n, step):
        r = qe_rank[s : s + step]
        c = cols[r].reshape(len(r), -1)
        v = vals[r].reshape(len(r), -1)
        order = np.argsort(c, axis=1, kind="stable")
        c = np.take_along_axis(c, order, axis=1)
        v = np.take_along_axis(v, order, axis=1)
        keep = c < n
        row_id = np.broadcast_to(np.arange(len(r))[:, None], c.shape)[keep]
        c, v = c[keep], v[keep]
        start = np.ones(len(c), bool)
        start[1:] = (c[1:] != c[:-1]) | (row_id[1:] != row_id[:-1])
        heads = np.flatnonzero(start)
        sums = np.add.reduceat(v, heads) if len(heads) else np.zeros(0, np.float32)
        ind_parts.append(c[heads])
        val_parts.append((sums / np.float32(k2)).astype(np.float32))
        per_row = np.bincount(row_id[heads], minlength=len(r))
        indptr_parts.append(total + np.cumsum(per_row))
        total += int(per_row.sum())
    return np.concatenate(indptr_parts), np.concatenate(ind_parts), np.concatenate(val_parts)


def _jaccard_rows(
    indptr,
    indices,
    data,
    num_query: int,
    n: int,
    combine: tuple | None = None,
    gallery_start: int | None = None,
    clip: bool = False,
) -> np.ndarray:
    """Jaccard distance 1 - m / (2 - m), m = sum_k min(V[q, k], V[g, k]), for queries x gallery.

    Queries are rows ``0:num_query``, gallery rows ``gallery_start:n`` (default: right after the
    queries; 0 for all pairs). ``clip`` sets negative values (rounding) to 0, as upstream's kNN
    Jaccard does. With ``combine = (qg_dist, rowmax2_q, lambda_value)`` each block of rows is combined
    with the original distances at once (see :func:`_combine_rows`) and written over ``qg_dist``: the
    result then needs no second query x gallery buffer."""
    g0 = num_query if gallery_start is None else gallery_start
    num_gallery = n - g0
    # inverted index over gallery rows: for each column, the gallery rows using it and their values
    g_lo = indptr[g0]
    g_rows = np.repeat(np.arange(num_gallery), np.diff(indptr[g0:]))
    g_cols = indices[g_lo:]
    g_vals = data[g_lo:]
    by_col = np.argsort(g_cols, kind="stable")
    inv_rows, inv_vals = g_rows[by_col], g_vals[by_col]
    col_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(g_cols, minlength=n), out=col_ptr[1:])

    jac = combine[0] if combine is not None else np.empty((num_query, num_gallery), np.float32)
    for s, e in _query_blocks(indptr, indices, col_ptr, num_query, num_gallery):
        lo, hi = indptr[s], indptr[e]
        q_row = np.repeat(np.arange(e - s), np.diff(indptr[s : e + 1]))
        q_col, q_val = indices[lo:hi], data[lo:hi]
        starts, counts = col_ptr[q_col], col_ptr[q_col + 1] - col_ptr[q_col]
        total = int(counts.sum())
        offs = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
        pos = np.repeat(starts, counts) + offs
        mins = np.minimum(np.repeat(q_val, counts), inv_vals[pos])
        flat = np.repeat(q_row, counts) * num_gallery + inv_rows[pos]
        m = np.bincount(flat, weights=mins, minlength=(e - s) * num_gallery).reshape(e - s, num_gallery)
        rows = 1.0 - m / (2.0 - m)
        if clip:
            np.maximum(rows, 0.0, out=rows)
        if combine is None:
            jac[s:e] = rows
        else:
            scale = None if combine[1] is None else combine[1][s:e]
            _combine_rows(rows, combine[0][s:e], scale, combine[2], out=jac[s:e])
    return jac


def _query_blocks(indptr, indices, col_ptr, num_query: int, num_gallery: int):
    """Blocks of query rows whose Jaccard work stays within ``budget`` elements: both the dense
    rows x gallery output and the (query entry, gallery row) pairs met through the inverted index
    (a "hub" column used by many gallery rows makes the latter large)."""
    budget = JACCARD_BLOCK_ELEMS
    q_nnz = indptr[num_query]
    pair_counts = (col_ptr[indices[:q_nnz] + 1] - col_ptr[indices[:q_nnz]]).astype(np.int64)
    cum = np.zeros(q_nnz + 1, np.int64)
    np.cumsum(pair_counts, out=cum[1:])
    per_row = cum[indptr[: num_query + 1]]  # pairs met before each query row
    s = 0
    while s < num_query:
        max_rows = max(1, budget // max(1, num_gallery))
        e = min(num_query, s + max_rows)
        # shrink the block until its pairs fit (always at least one row)
        e = max(s + 1, min(e, int(np.searchsorted(per_row, per_row[s] + budget, side="right")) - 1))
        yield s, e
        s = e


def _check_k(k1: int, k2: int, n: int) -> None:
    if k1 < 1 or k2 < 1:
        raise ValueError(f"re-ranking needs k1 >= 1 and k2 >= 1 (TEST.RERANK.K1/K2), got k1={k1}, k2={k2}")
    if n < 2:
        raise ValueError("re-ranking needs at least two items (queries + gallery)")


def _combine_rows(
    jac: np.ndarray, qg_dist: np.ndarray, rowmax2_q: np.ndarray | None, lambda_value: float, out: np.ndarray
) -> None:
    """final = (1 - lambda) * jaccard + lambda * (d^2 / row max of d^2) for a block of rows (classic),
    or ``+ lambda * d`` when ``rowmax2_q`` is None (upstream's evaluator)."""
    lam = np.float32(lambda_value)
    d = qg_dist.astype(np.float32)
    orig = d if rowmax2_q is None else (d * d) / rowmax2_q[:, None]
    out[...] = jac.astype(np.float32) * (np.float32(1.0) - lam) + orig * lam


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
    _check_k(k1, k2, nq + ng)
    nb = _MatrixNeighbours(q_g, q_q, g_g, k=max(k1 + 1, k2) * 2)
    indptr, indices, data = _encode(nb, k1, k2)
    out = np.array(q_g, dtype=np.float32, copy=True)  # the caller's matrix stays untouched
    return _jaccard_rows(indptr, indices, data, nq, nq + ng, combine=(out, nb.rowmax2[:nq], lambda_value))


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
    check_metric(metric)
    if metric == "jaccard":
        raise ValueError("re-ranking needs a base metric: 'cosine' or 'euclidean'")
    qf, gf = as_float_tensor(query_feat, "query_feat"), as_float_tensor(gallery_feat, "gallery_feat")
    nq = qf.shape[0]
    _check_k(k1, k2, nq + gf.shape[0])
    nb = _FeatureNeighbours([qf, gf], metric, k=max(k1 + 1, k2) * 2, keep_rows=nq, keep_from=nq)
    indptr, indices, data = _encode(nb, k1, k2)
    qg, rowmax2_q = nb.kept, nb.rowmax2[:nq]
    del nb  # its copy of the features is no longer needed
    return _jaccard_rows(indptr, indices, data, nq, nq + gf.shape[0], combine=(qg, rowmax2_q, lambda_value))


@torch.no_grad()
def jaccard_distance(feat_1, feat_2, k1: int = 20, k2: int = 6, metric: str = "euclidean") -> np.ndarray:
    """The k-reciprocal Jaccard distance alone (``lambda_value = 0``) between two feature sets."""
    f1, f2 = as_float_tensor(feat_1, "feat_1"), as_float_tensor(feat_2, "feat_2")
    _check_k(k1, k2, f1.shape[0] + f2.shape[0])
    nb = _FeatureNeighbours([f1, f2], metric, k=max(k1 + 1, k2) * 2)
    indptr, indices, data = _encode(nb, k1, k2)
    return _jaccard_rows(indptr, indices, data, f1.shape[0], f1.shape[0] + f2.shape[0])


def _knn_size(k1: int, k2: int) -> int:
    """Neighbours kept per row: twice what the sets use, so ties at the edge are ordered by index."""
    return max(k1 + 1, k2) * 2


@torch.no_grad()
def knn_jaccard(feat_1, feat_2, k1: int = 20, k2: int = 6, all_pairs: bool = False) -> np.ndarray:
    """Upstream's kNN Jaccard distance between ``feat_1`` rows and ``feat_2`` rows (float32).

    Neighbours are searched over the union by squared Euclidean distance of the features as given.
    With ``all_pairs`` the result is the ``N x N`` matrix over the union (upstream's
    ``compute_jaccard_distance``); otherwise the ``len(feat_1) x len(feat_2)`` block.
    """
    f1, f2 = as_float_tensor(feat_1, "feat_1"), as_float_tensor(feat_2, "feat_2")
    n1, n = f1.shape[0], f1.shape[0] + f2.shape[0]
    _check_k(k1, k2, n)
    nb = _FeatureNeighbours([f1, f2], "euclidean", k=_knn_size(k1, k2))
    indptr, indices, data = _encode(nb, k1, k2, knn_sq_scale=1.0)
    if all_pairs:
        return _jaccard_rows(indptr, indices, data, n, n, gallery_start=0, clip=True)
    return _jaccard_rows(indptr, indices, data, n1, n, clip=True)


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
    check_metric(metric)
    if metric == "jaccard":
        raise ValueError("re-ranking needs a base metric: 'cosine' or 'euclidean'")
    qf, gf = as_float_tensor(query_feat, "query_feat"), as_float_tensor(gallery_feat, "gallery_feat")
    nq = qf.shape[0]
    _check_k(k1, k2, nq + gf.shape[0])
    # Cosine neighbours of unit vectors are their Euclidean neighbours, and |a - b|^2 = 2 (1 - cos):
    # one pass gives both upstream's kNN (on normalised features) and its cosine base distance.
    nb = _FeatureNeighbours([qf, gf], metric, k=_knn_size(k1, k2), keep_rows=nq, keep_from=nq)
    indptr, indices, data = _encode(nb, k1, k2, knn_sq_scale=2.0 if metric == "cosine" else 1.0)
    qg = nb.kept
    del nb
    return _jaccard_rows(
        indptr, indices, data, nq, nq + gf.shape[0], combine=(qg, None, lambda_value), clip=True
    )
