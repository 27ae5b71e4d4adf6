"""The neighbour pass of re-ranking: per item of queries + gallery, its nearest items, their
distances and the row maximum of squared distances, from features (one pass over the upper
triangle of the ``N x N`` distances, a block at a time) or from the classic three distance
matrices (a block of rows at a time), and any other pair's distance on request."""

from __future__ import annotations

import numpy as np
import torch

from ..pairwise import as_float_tensor, check_metric, default_chunk_rows

# Distances per block of rows in the neighbour pass (48 MB of float32); tests lower it.
BLOCK_ELEMS = 12 * 1024 * 1024
# Elements of feature rows gathered at once when looking up pair distances (16 MB of float32).
PAIR_BLOCK_ELEMS = 4 * 1024 * 1024


def neighbours_kept(k1: int, k2: int) -> int:
    """Neighbours kept per row: twice what the sets use, so ties at the edge are ordered by index."""
    return max(k1 + 1, k2) * 2


def check_k(k1: int, k2: int, n: int) -> None:
    if k1 < 1 or k2 < 1:
        raise ValueError(f"re-ranking needs k1 >= 1 and k2 >= 1 (TEST.RERANK.K1/K2), got k1={k1}, k2={k2}")
    if n < 2:
        raise ValueError("re-ranking needs at least two items (queries + gallery)")


def rerank_inputs(
    query_feat, gallery_feat, k1: int, k2: int, metric: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """Query and gallery features as float tensors, after checking ``k1``/``k2`` and that ``metric``
    is a base metric (the re-ranked distance is built on it)."""
    check_metric(metric)
    if metric == "jaccard":
        raise ValueError("re-ranking needs a base metric: 'cosine' or 'euclidean'")
    qf, gf = as_float_tensor(query_feat, "query_feat"), as_float_tensor(gallery_feat, "gallery_feat")
    check_k(k1, k2, qf.shape[0] + gf.shape[0])
    return qf, gf


class Neighbours:
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


def _finish_rows(nb: Neighbours, vals: list, idxs: list, maxs: list) -> None:
    nb.dist, nb.idx = _stable_rows(np.concatenate(vals).astype(np.float32), np.concatenate(idxs))
    rowmax = np.concatenate(maxs)
    nb.rowmax2 = np.maximum(rowmax[:, 0] * rowmax[:, 0], rowmax[:, 1] * rowmax[:, 1]).astype(np.float32)


class FeatureNeighbours(Neighbours):
    """Neighbours from features in one pass over the upper triangle of the ``N x N`` distances.

    Block ``[s:e] x [s:N]`` serves rows ``s:e`` directly and rows ``e:N`` through its transpose, so each
    distance is computed once (half the matmul work of a full pass). Running top-k lists and row
    extremes are merged block by block. Optionally keeps the query x gallery block, the only dense
    output the caller needs. Cosine runs on similarities (larger = nearer, d = 1 - s) to skip a pass.
    """

    @torch.no_grad()
    def __init__(self, parts: list, metric: str, k: int, keep_rows: int = 0, keep_from: int = 0):
        if len(parts) == 1 and metric != "cosine":
            x = as_float_tensor(parts[0]).contiguous()  # read only: no copy of one float32 part
        else:
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


class MatrixNeighbours(Neighbours):
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
