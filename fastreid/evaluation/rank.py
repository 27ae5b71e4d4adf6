"""CMC, mAP and mINP without a compile step: vectorised, exact, in bounded memory.

Protocol (Market-1501, as upstream): for each query, gallery items with the query's pid *and* camid are
ignored ("junk"); a query whose pid has no remaining gallery item is skipped. ``keep_same_camera=True``
(``TEST.KEEP_SAME_CAMERA``) keeps those items as true matches, for single-camera data. Skipped queries
are counted and logged; evaluation fails (:class:`NoValidQueryError`) only when no query is valid.

Ranking convention: a query's gallery items are ordered by distance with ties broken by gallery index
(ascending), i.e. ``np.argsort(row, kind="stable")``; NaN distances sort last as in numpy. Upstream uses
the default (unstable) quicksort, which orders exact ties arbitrarily; without ties the numbers are
identical.

How it avoids sorting: only the ranks of the true matches matter, and the rank of the k-th true match
(in distance order) is k plus the number of other-identity items ranked before it. With ``t`` the
largest distance of a query's true matches, only items with a distance ``<= t`` can be ranked before
any of them. So per chunk of queries one comparison pass selects those items, a binary search among the
query's few sorted true matches tells which matches each of them precedes, and a histogram gives every
rank: O(cells + candidates * log m), no sort of candidates and no candidate-sized permutation. From the
ranks ``r_k`` (k = 1..m) follow AP = mean(k / r_k), INP = m / r_m, and the CMC from r_1.
"""

from __future__ import annotations

import logging
from typing import Any, Union

import numpy as np
import torch

from fastreid.utils.errors import UserError
from fastreid.utils.pairwise import default_chunk_rows, iter_dist_chunks

from .memory import release_freed_memory

__all__ = [
    "NoValidQueryError",
    "RankAccumulator",
    "eval_cuhk03",
    "eval_market1501",
    "evaluate_py",
    "evaluate_rank",
    "evaluate_rank_from_features",
]

logger = logging.getLogger(__name__)

ArrayLike = Union[np.ndarray, torch.Tensor]

# Distances per chunk in evaluate_rank_from_features.
EVAL_CHUNK_DISTANCES = 24 * 1024 * 1024

# CUHK03 single-gallery-shot protocol: number of random gallery samplings averaged, as upstream.
CUHK03_NUM_REPEATS = 10


class NoValidQueryError(UserError, ValueError):
    """No query has a true match in the gallery under the evaluation protocol."""

    label = "Evaluation error"


def _as_ids(x, name: str) -> np.ndarray:
    arr = x.cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
    arr = arr.reshape(-1)
    if arr.dtype.kind not in "iub":
        raise TypeError(f"{name} must hold integers, got dtype {arr.dtype}")
    return arr.astype(np.int64, copy=False)


def _row_keys(rows: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """int64 keys ordered like (row, float32 value): the row in the high 32 bits, the value's bits
    mapped to an order-preserving unsigned integer in the low 32 (-0.0 and 0.0 share a key)."""
    bits = (values + 0.0).view(torch.int32)
    bits = torch.where(bits < 0, bits ^ 0x7FFFFFFF, bits).to(torch.int64) + 2**31
    return (rows.to(torch.int64) << 32) | bits


def _count_smaller_cols(
    lo: torch.Tensor, hi: torch.Tensor, cols: torch.Tensor, col: torch.Tensor
) -> torch.Tensor:
    """For each i: how many of ``cols[lo[i]:hi[i]]`` are smaller than ``col[i]`` (tied-distance ranges)."""
    width = hi - lo
    owner = torch.repeat_interleave(torch.arange(len(lo)), width)
    pos = torch.arange(int(width.sum())) - torch.repeat_interleave(torch.cumsum(width, 0) - width, width)
    smaller = (cols[lo[owner] + pos] < col[owner]).to(torch.int64)
    return torch.zeros(len(lo), dtype=torch.int64).index_add_(0, owner, smaller)


class RankAccumulator:
    """Collects per-query ranking statistics chunk by chunk (queries in order).

    ``add(dist_chunk, q_pids, q_camids)`` takes the distances of some queries to the whole gallery;
    ``result()`` returns ``(cmc, all_AP, all_INP)`` like :func:`evaluate_rank`.
    """

    def __init__(
        self, g_pids: ArrayLike, g_camids: ArrayLike, max_rank: int = 50, keep_same_camera: bool = False
    ):
        self.g_pids = _as_ids(g_pids, "g_pids")
        self.g_camids = _as_ids(g_camids, "g_camids")
        if len(self.g_pids) != len(self.g_camids):
            raise ValueError(
                f"g_pids ({len(self.g_pids)}) and g_camids ({len(self.g_camids)}) differ in length"
            )
        num_g = len(self.g_pids)
        if num_g == 0:
            raise ValueError("the gallery is empty")
        if num_g < max_rank:
            logger.info("Note: number of gallery samples is quite small, got %d", num_g)
            max_rank = num_g
        self.max_rank = int(max_rank)
        self.keep_same_camera = bool(keep_same_camera)
        self.num_same_camera_only = 0  # queries whose identity is in the gallery only in their camera
        order = np.argsort(self.g_pids, kind="stable")
        self._order = order
        self._g_pids_t = torch.from_numpy(self.g_pids)
        self._uniq, self._starts, self._counts = np.unique(
            self.g_pids[order], return_index=True, return_counts=True
        )
        self._ap: list[np.ndarray] = []
        self._inp: list[np.ndarray] = []
        self._first: list[np.ndarray] = []
        self.num_queries = 0

    def same_pid_pairs(self, q_pids: np.ndarray, q_camids: np.ndarray):
        """Rows and gallery columns of same-pid pairs, split into (true matches, junk)."""
        idx = np.searchsorted(self._uniq, q_pids).clip(max=len(self._uniq) - 1)
        found = self._uniq[idx] == q_pids
        counts = np.where(found, self._counts[idx], 0)
        rows = np.repeat(np.arange(len(q_pids)), counts)
        offsets = np.arange(len(rows)) - np.repeat(np.cumsum(counts) - counts, counts)
        cols = self._order[np.repeat(self._starts[idx], counts) + offsets]
        junk = self.g_camids[cols] == q_camids[rows]
        if self.keep_same_camera:
            junk[:] = False
        return (rows[~junk], cols[~junk]), (rows[junk], cols[junk])

    @torch.no_grad()
    def add(self, dist: ArrayLike, q_pids: ArrayLike, q_camids: ArrayLike) -> None:
        d = (
            torch.from_numpy(np.ascontiguousarray(dist, dtype=np.float32))
            if isinstance(dist, np.ndarray)
            else dist
        )
        d = d.detach().to("cpu", torch.float32)
        qp, qc = _as_ids(q_pids, "q_pids"), _as_ids(q_camids, "q_camids")
        c = d.shape[0]
        if d.dim() != 2 or d.shape[1] != len(self.g_pids) or len(qp) != c or len(qc) != c:
            raise ValueError(
                f"distance chunk of shape {tuple(d.shape)} does not match {len(qp)} query ids / "
                f"{len(qc)} query camids and {len(self.g_pids)} gallery items"
            )
        self.num_queries += c
        (prows, pcols), (jrows, _) = self.same_pid_pairs(qp, qc)
        pos_d = d[torch.from_numpy(prows), torch.from_numpy(pcols)]
        if torch.isnan(pos_d).any():
            bad = int(prows[torch.isnan(pos_d).numpy()][0])
            raise ValueError(
                f"distance matrix has NaN for a true match of query {self.num_queries - c + bad}"
            )
        num_pos = np.bincount(prows, minlength=c)
        valid = num_pos > 0
        self.num_same_camera_only += int((~valid & (np.bincount(jrows, minlength=c) > 0)).sum())
        if not valid.any():
            return
        t_max = torch.full((c,), -float("inf"))
        t_max.scatter_reduce_(0, torch.from_numpy(prows), pos_d, reduce="amax")
        # Rank of a true match = its position among the true matches + the negatives ranked before it.
        # Negatives that can be ranked before any true match have d <= t_max (the last match's distance).
        # numpy's 1-D nonzero is ~4x faster than torch.nonzero on a 2-D mask (row-major order either way)
        flat = np.flatnonzero((d <= t_max[:, None]).numpy().reshape(-1))
        cr, cc = torch.from_numpy(flat // d.shape[1]), torch.from_numpy(flat % d.shape[1])
        neg = self._g_pids_t[cc] != torch.from_numpy(qp)[cr]  # same-pid items are true matches or junk
        cr, cc = cr[neg], cc[neg]
        neg_key = _row_keys(cr, d[cr, cc])
        # True matches sorted by (row, distance, gallery index): the rule ties follow.
        prow_t, pcol_t = torch.from_numpy(prows), torch.from_numpy(pcols)
        pkey = _row_keys(prow_t, pos_d)
        order = torch.from_numpy(np.lexsort((pcols, pkey.numpy())))
        pkey, pcol_t, prow_t = pkey[order], pcol_t[order], prow_t[order]
        # Each negative precedes the true matches from index `at` on (within its row).
        at = torch.searchsorted(pkey, neg_key)
        tie_end = torch.searchsorted(pkey, neg_key, right=True)
        ties = torch.nonzero(tie_end > at).flatten()
        if len(ties):  # equal distances: the true matches with a smaller gallery index come first
            at[ties] += _count_smaller_cols(at[ties], tie_end[ties], pcol_t, cc[ties])
        prow_np = prow_t.numpy()
        row_end = np.searchsorted(prow_np, np.arange(c), side="right")
        at_np = at.numpy()
        inside = at_np < row_end[cr.numpy()]  # negatives tied with the last match and after it: none
        neg_before = np.cumsum(np.bincount(at_np[inside], minlength=len(prow_np)))
        row_start = np.searchsorted(prow_np, np.arange(c))
        k = np.arange(len(prow_np)) - row_start[prow_np] + 1
        prank = k + neg_before - np.where(row_start[prow_np] > 0, neg_before[row_start[prow_np] - 1], 0)
        ap_sum = np.bincount(prow_np, weights=k / prank, minlength=c)
        m = num_pos[valid]
        first = prank[row_start[valid]]
        last = prank[row_start[valid] + m - 1]
        self._ap.append(ap_sum[valid] / m)
        self._inp.append(m / last)
        self._first.append(first)

    @property
    def num_valid(self) -> int:
        return int(sum(len(f) for f in self._first))

    def result(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        first = np.concatenate(self._first) if self._first else np.zeros(0, np.int64)
        skipped = self.num_queries - len(first)
        if len(first) == 0:
            if self.num_same_camera_only:
                raise NoValidQueryError(
                    f"none of the {self.num_queries} queries has a match in the gallery from another camera "
                    f"({self.num_same_camera_only} have matches from their own camera only, which the standard "
                    "protocol ignores); for single-camera or same-camera data set TEST.KEEP_SAME_CAMERA True"
                )
            raise NoValidQueryError(
                f"none of the {self.num_queries} query identities appears in the gallery; check the data set's "
                "query/gallery split (person ids are parsed from the file names)"
            )
        if skipped:
            hint = (
                f" ({self.num_same_camera_only} have matches from their own camera only: "
                "TEST.KEEP_SAME_CAMERA True counts them)"
                if self.num_same_camera_only
                else ""
            )
            logger.warning(
                "%d of %d queries have no valid gallery match and were skipped%s",
                skipped,
                self.num_queries,
                hint,
            )
        hist = np.bincount(np.minimum(first, self.max_rank + 1) - 1, minlength=self.max_rank + 1)
        cmc = np.cumsum(hist[: self.max_rank]).astype(np.float32) / np.float32(len(first))
        return cmc.astype(np.float32), np.concatenate(self._ap), np.concatenate(self._inp)


def _cuhk03_cmc(
    dist: np.ndarray,
    q_pids: np.ndarray,
    q_camids: np.ndarray,
    g_pids: np.ndarray,
    g_camids: np.ndarray,
    max_rank: int,
    rng: np.random.Generator,
    keep_same_camera: bool = False,
) -> np.ndarray | None:
    """Per-query CMC of the single-gallery-shot protocol (one random image per gallery identity)."""
    rows = []
    for i in range(dist.shape[0]):
        order = np.argsort(dist[i], kind="stable")
        kept = (
            order
            if keep_same_camera
            else order[~((g_pids[order] == q_pids[i]) & (g_camids[order] == q_camids[i]))]
        )
        kept_pids = g_pids[kept]
        if not (kept_pids == q_pids[i]).any():
            continue
        by_pid = np.argsort(kept_pids, kind="stable")
        uniq, starts, counts = np.unique(kept_pids[by_pid], return_index=True, return_counts=True)
        pick = starts[None, :] + (rng.random((CUHK03_NUM_REPEATS, len(uniq))) * counts).astype(np.int64)
        chosen = by_pid[pick]  # kept positions (rank order) of the sampled image of each identity
        own = chosen[:, np.searchsorted(uniq, q_pids[i])]
        rank0 = (chosen < own[:, None]).sum(axis=1)
        hits = (np.arange(max_rank)[None, :] >= rank0[:, None]).astype(np.float32)
        rows.append(hits.sum(axis=0) / CUHK03_NUM_REPEATS)
    return np.stack(rows) if rows else None


def evaluate_rank(
    distmat: ArrayLike,
    q_pids: ArrayLike,
    g_pids: ArrayLike,
    q_camids: ArrayLike,
    g_camids: ArrayLike,
    max_rank: int = 50,
    use_metric_cuhk03: bool = False,
    use_cython: bool = True,
    *,
    chunk_rows: int | None = None,
    seed: int = 0,
    keep_same_camera: bool = False,
) -> tuple[Any, ...]:
    """Upstream's ``evaluate_rank``, with upstream's return value: ``(cmc, all_AP, all_INP)``, or
    with ``use_metric_cuhk03`` ``(cmc, mAP)``.

    ``use_cython`` is accepted for upstream's call signature and ignored: there is no compiled
    evaluator to choose; this vectorised one is exact and faster than upstream's Cython code.

    ``cmc`` (float32, length ``min(max_rank, num_gallery)``) is averaged over valid queries; ``all_AP`` and
    ``all_INP`` (float64) hold one value per valid query, in query order. ``use_metric_cuhk03`` switches the
    CMC to the single-gallery-shot protocol (one random gallery image per identity, averaged over 10
    samplings drawn from ``seed``; upstream draws from numpy's global generator) and returns the mean
    AP of the full rankings (a numpy float64, as upstream computes it) in place of the per-query lists.
    Rows are processed ``chunk_rows`` at a time (default: about 8M distances per chunk).
    """
    if isinstance(distmat, torch.Tensor):
        distmat = distmat.detach().cpu()
    elif not isinstance(distmat, np.ndarray):
        distmat = np.asarray(distmat)
    if distmat.ndim != 2:
        raise ValueError(f"distmat must be 2-D (num_query x num_gallery), got shape {tuple(distmat.shape)}")
    qp, qc = _as_ids(q_pids, "q_pids"), _as_ids(q_camids, "q_camids")
    if len(qp) != distmat.shape[0] or len(qc) != distmat.shape[0]:
        raise ValueError(f"distmat has {distmat.shape[0]} rows but {len(qp)} q_pids and {len(qc)} q_camids")
    acc = RankAccumulator(g_pids, g_camids, max_rank, keep_same_camera=keep_same_camera)
    rows = chunk_rows or default_chunk_rows(distmat.shape[1])
    cuhk_rows = []
    rng = np.random.default_rng(seed)
    for start in range(0, distmat.shape[0], rows):
        chunk = distmat[start : start + rows]
        acc.add(chunk, qp[start : start + rows], qc[start : start + rows])
        release_freed_memory()  # peak memory independent of the number of queries
        if use_metric_cuhk03:
            arr = chunk.numpy() if isinstance(chunk, torch.Tensor) else chunk
            part = _cuhk03_cmc(
                np.asarray(arr, dtype=np.float32),
                qp[start : start + rows],
                qc[start : start + rows],
                acc.g_pids,
                acc.g_camids,
                acc.max_rank,
                rng,
                keep_same_camera,
            )
            if part is not None:
                cuhk_rows.append(part)
    cmc, all_ap, all_inp = acc.result()
    if use_metric_cuhk03:
        all_cmc = np.concatenate(cuhk_rows).astype(np.float32)
        cuhk_cmc = (all_cmc.sum(axis=0) / np.float32(len(all_cmc))).astype(np.float32)
        return cuhk_cmc, np.float64(np.mean(all_ap))
    return cmc, all_ap, all_inp


def eval_market1501(
    distmat, q_pids, g_pids, q_camids, g_camids, max_rank: int
) -> tuple[np.ndarray, list, list]:
    """Upstream's Market-1501 protocol (a query's gallery images of its own identity from its own
    camera are left out): ``(cmc, all_AP, all_INP)`` with per-query lists, as upstream returns them."""
    cmc, all_ap, all_inp = evaluate_rank(distmat, q_pids, g_pids, q_camids, g_camids, max_rank)
    return cmc, list(all_ap), list(all_inp)


def eval_cuhk03(distmat, q_pids, g_pids, q_camids, g_camids, max_rank: int) -> tuple[np.ndarray, float]:
    """Upstream's CUHK03 protocol (the CMC of one random gallery image per identity, averaged over 10
    draws): ``(cmc, mAP)``. The draws come from a fixed seed here, upstream's from numpy's global
    generator."""
    return evaluate_rank(distmat, q_pids, g_pids, q_camids, g_camids, max_rank, use_metric_cuhk03=True)


def evaluate_py(distmat, q_pids, g_pids, q_camids, g_camids, max_rank: int, use_metric_cuhk03: bool):
    """Upstream's pure-Python entry point: :func:`eval_cuhk03` or :func:`eval_market1501`."""
    if use_metric_cuhk03:
        return eval_cuhk03(distmat, q_pids, g_pids, q_camids, g_camids, max_rank)
    return eval_market1501(distmat, q_pids, g_pids, q_camids, g_camids, max_rank)


def evaluate_rank_from_features(
    query_feat: ArrayLike,
    gallery_feat: ArrayLike,
    q_pids: ArrayLike,
    g_pids: ArrayLike,
    q_camids: ArrayLike,
    g_camids: ArrayLike,
    metric: str = "cosine",
    max_rank: int = 50,
    chunk_rows: int | None = None,
    keep_same_camera: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Same as ``evaluate_rank(build_dist(query_feat, gallery_feat, metric), ...)`` without ever holding
    the whole distance matrix: distances are computed and consumed one chunk of queries at a time."""
    qp, qc = _as_ids(q_pids, "q_pids"), _as_ids(q_camids, "q_camids")
    acc = RankAccumulator(g_pids, g_camids, max_rank, keep_same_camera=keep_same_camera)
    # Chunks of ~24M distances (96 MB, one buffer): each chunk reads the whole gallery once, so at an
    # MSMT17-sized gallery 300-row chunks evaluate ~10 % faster than 100-row ones (the default's 32 MB).
    rows = chunk_rows or default_chunk_rows(len(gallery_feat), budget_elems=EVAL_CHUNK_DISTANCES)
    chunks = iter_dist_chunks(query_feat, gallery_feat, metric, rows, reuse_buffer=True)
    for start, end, chunk in chunks:  # each chunk is consumed before the next overwrites it
        acc.add(chunk, qp[start:end], qc[start:end])
        del chunk
        release_freed_memory()  # peak memory independent of the number of queries
    return acc.result()
