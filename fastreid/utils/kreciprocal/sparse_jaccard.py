"""The sparse core shared by both re-ranking methods: the (expanded) k-reciprocal sets, their
encoding ``V`` as sparse rows (with query expansion over ``k2`` neighbours), and the Jaccard distance
between query and gallery rows through an inverted index, a block of query rows at a time,
optionally combined with the original distances."""

from __future__ import annotations

import numpy as np

from .neighbours import Neighbours

# Elements of work per block of query rows in the Jaccard pass (output cells or index pairs).
JACCARD_BLOCK_ELEMS = 4_000_000
# Cells of the sparse graph's grouping table (rows of a block x n; int64: 2 MB, which caches stay hot in).
GRAPH_TABLE_ELEMS = 250_000


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


def encode(nb: Neighbours, k1: int, k2: int, knn_sq_scale: float | None = None):
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


def jaccard_rows(
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


def _combine_rows(
    jac: np.ndarray, qg_dist: np.ndarray, rowmax2_q: np.ndarray | None, lambda_value: float, out: np.ndarray
) -> None:
    """final = (1 - lambda) * jaccard + lambda * (d^2 / row max of d^2) for a block of rows (classic),
    or ``+ lambda * d`` when ``rowmax2_q`` is None (upstream's evaluator)."""
    lam = np.float32(lambda_value)
    d = qg_dist.astype(np.float32)
    orig = d if rowmax2_q is None else (d * d) / rowmax2_q[:, None]
    out[...] = jac.astype(np.float32) * (np.float32(1.0) - lam) + orig * lam


def jaccard_graph(
    indptr, indices, data, n: int, max_distance: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All-pairs Jaccard distances of the ``n`` encoded rows that are at most ``max_distance``, as
    CSR arrays ``(indptr, indices, distances)``, each row ordered by distance, then column.

    Each stored value is bit for bit the one :func:`jaccard_rows` (``gallery_start=0, clip=True``, the
    dense ``N x N`` matrix of ``compute_jaccard_distance``) puts at that place: the same minima are
    summed in the same order (``np.bincount`` over the pairs met through the inverted index, in the
    order they are met), then ``1 - m / (2 - m)`` in float64, clipped at 0 and rounded to float32.
    The comparison with ``max_distance`` is made on those float32 values, as a consumer of the dense
    matrix (DBSCAN with ``eps``) compares them. ``max_distance`` must be below 1: a pair whose rows
    share no column is at distance 1 and is never met.

    No ``n x n`` array is made and nothing is sorted but what is kept: the work is the pairs that
    share a column, a block of rows at a time (at most ``JACCARD_BLOCK_ELEMS`` pairs, and
    ``GRAPH_TABLE_ELEMS // n`` rows, a row with more pairs being a block of its own). The pairs of
    a block are grouped through a table indexed by (row in the block, column): each pair writes its
    position there and reads back one position per distinct pair (whichever write won), which
    names its group; the table is written once and never cleared (only what was just written is
    read)."""
    if not max_distance < 1.0:
        raise ValueError(
            f"the sparse Jaccard graph keeps distances below 1 (pairs with something in common); got "
            f"max_distance {max_distance}"
        )
    limit = np.float32(max_distance)
    by_col = np.argsort(indices, kind="stable")
    inv_rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))[by_col]
    inv_vals = data[by_col]
    col_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(indices, minlength=n), out=col_ptr[1:])

    nnz = indptr[n]
    pair_counts = (col_ptr[indices[:nnz] + 1] - col_ptr[indices[:nnz]]).astype(np.int64)
    met_before = np.zeros(nnz + 1, np.int64)
    np.cumsum(pair_counts, out=met_before[1:])
    met_before = met_before[indptr[: n + 1]]  # pairs met before each row

    max_rows = max(1, GRAPH_TABLE_ELEMS // n)
    table = np.empty(max_rows * n, np.int64)  # (row in block, column) -> a position of that pair
    rows_kept, cols_kept, dist_kept = [], [], []
    s = 0
    while s < n:
        e = int(np.searchsorted(met_before, met_before[s] + JACCARD_BLOCK_ELEMS, side="right")) - 1
        e = min(n, s + max_rows, max(s + 1, e))
        lo, hi = indptr[s], indptr[e]
        counts = pair_counts[lo:hi]
        total = int(counts.sum())
        if total == 0:
            s = e
            continue
        first = np.cumsum(counts) - counts  # where each query entry's pairs start
        pos = np.arange(total, dtype=np.int64) + np.repeat(col_ptr[indices[lo:hi]] - first, counts)
        mins = np.minimum(np.repeat(data[lo:hi], counts), inv_vals[pos])
        cols = inv_rows[pos]
        row_base = np.repeat((np.arange(s, e, dtype=np.int64) - s) * n, np.diff(indptr[s : e + 1]))
        keys = np.repeat(row_base, counts) + cols
        order = np.arange(total, dtype=np.int64)
        table[keys] = order
        group = table[keys]
        m = np.bincount(group, weights=mins, minlength=total)  # each pair's minima, in the order met
        heads = np.flatnonzero(group == order)
        m = m[heads]
        dist = np.maximum(1.0 - m / (2.0 - m), 0.0).astype(np.float32)
        keep = dist <= limit
        kept = heads[keep]
        rows_kept.append(keys[kept] // n + s)
        cols_kept.append(cols[kept])
        dist_kept.append(dist[keep])
        s = e
    rows = np.concatenate(rows_kept) if rows_kept else np.zeros(0, np.int64)
    cols = np.concatenate(cols_kept) if cols_kept else np.zeros(0, np.int64)
    dist = np.concatenate(dist_kept) if dist_kept else np.zeros(0, np.float32)
    order = np.lexsort((cols, dist, rows))
    out_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=out_ptr[1:])
    return out_ptr, cols[order], dist[order]
