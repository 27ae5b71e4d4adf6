"""Pictures of an evaluation, written as PNG files: rank lists, CMC, ROC, distance histograms
(the drawing itself is :mod:`fastreid.utils.visualizer`'s)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import numpy as np

from fastreid.utils.compute_dist import build_dist
from fastreid.utils.visualizer import plot_cmc, plot_distance_histogram, plot_roc, rank_list_image

from .rank import RankAccumulator, _as_ids, evaluate_rank
from .roc import evaluate_roc, roc_curve

__all__ = [
    "save_rank_lists",
    "select_queries",
    "write_evaluation_pictures",
]


def ranked_gallery(dist_row: np.ndarray, q_pid: int, q_camid: int, g_pids: np.ndarray, g_camids: np.ndarray):
    """Gallery indices by distance (ties by index), without junk (same pid and camera as the query)."""
    order = np.argsort(dist_row, kind="stable")
    junk = (g_pids[order] == q_pid) & (g_camids[order] == q_camid)
    return order[~junk]


def select_queries(ap: np.ndarray, num: int, rank_sort: str = "ascending") -> np.ndarray:
    """Which queries to draw: the worst (``ascending`` AP), the best (``descending``) or the first."""
    if rank_sort == "ascending":
        order = np.argsort(ap, kind="stable")
    elif rank_sort == "descending":
        order = np.argsort(-ap, kind="stable")
    elif rank_sort == "none":
        order = np.arange(len(ap))
    else:
        raise ValueError(f"rank_sort must be 'ascending', 'descending' or 'none', got {rank_sort!r}")
    return order[:num]


def per_query_ap(distmat: np.ndarray, q_pids, g_pids, q_camids, g_camids) -> np.ndarray:
    """AP of every query (NaN for a query without a valid true match)."""
    qp, qc = _as_ids(q_pids, "q_pids"), _as_ids(q_camids, "q_camids")
    acc = RankAccumulator(g_pids, g_camids, max_rank=1)
    (rows, _), _ = acc.same_pid_pairs(qp, qc)
    valid = np.bincount(rows, minlength=len(qp)) > 0
    ap = np.full(len(qp), np.nan)
    if valid.any():
        step = max(1, 4_000_000 // max(1, distmat.shape[1]))
        for s in range(0, len(qp), step):
            acc.add(np.asarray(distmat[s : s + step], np.float32), qp[s : s + step], qc[s : s + step])
        ap[valid] = acc.result()[1]
    return ap


def save_rank_lists(
    distmat: np.ndarray,
    q_pids,
    g_pids,
    q_camids,
    g_camids,
    query_images: Sequence,
    gallery_images: Sequence,
    output_dir: str,
    num_vis: int = 100,
    rank_sort: str = "ascending",
    max_rank: int = 10,
    size=(64, 128),
    progress: Callable | None = None,
) -> list[str]:
    """Write one rank-list PNG per selected query; returns the file paths.

    ``query_images`` / ``gallery_images`` are paths (or PIL images / arrays) in the order of the rows and
    columns of ``distmat``. Queries are chosen by AP (worst first by default).
    """
    q_pids, g_pids = _as_ids(q_pids, "q_pids"), _as_ids(g_pids, "g_pids")
    q_camids, g_camids = _as_ids(q_camids, "q_camids"), _as_ids(g_camids, "g_camids")
    ap = per_query_ap(distmat, q_pids, g_pids, q_camids, g_camids)
    candidates = np.flatnonzero(~np.isnan(ap))
    chosen = candidates[select_queries(ap[candidates], num_vis, rank_sort)]
    os.makedirs(output_dir, exist_ok=True)
    paths = []
    for n, q in enumerate(chosen):
        ranked = ranked_gallery(np.asarray(distmat[q]), q_pids[q], q_camids[q], g_pids, g_camids)[:max_rank]
        matches = g_pids[ranked] == q_pids[q]
        captions = [f"{i + 1}:{float(distmat[q][g]):.2f}" for i, g in enumerate(ranked)]
        strip = rank_list_image(
            query_images[q], [gallery_images[g] for g in ranked], matches, size, captions=captions
        )
        path = os.path.join(output_dir, f"{n:04d}_q{q}_ap{ap[q] * 100:.1f}.png")
        strip.save(path)
        paths.append(path)
        if progress:
            progress(n + 1, len(chosen))
    return paths


def write_evaluation_pictures(
    query_feat,
    gallery_feat,
    q_pids,
    g_pids,
    q_camids,
    g_camids,
    query_images: Sequence,
    gallery_images: Sequence,
    output_dir: str,
    metric: str = "cosine",
    num_vis: int = 100,
    rank_sort: str = "ascending",
    max_rank: int = 10,
    max_hist_pairs: int = 2_000_000,
    seed: int = 0,
) -> dict:
    """All pictures of one evaluation under ``output_dir``: ``rank_lists/*.png``, ``cmc.png``,
    ``roc.png`` and ``distance_hist.png``. Returns ``{"rank_lists": [...], "cmc": ..., ...}``.

    The histogram draws at most ``max_hist_pairs`` non-match distances (a seeded random sample).
    """
    q_pids, g_pids = _as_ids(q_pids, "q_pids"), _as_ids(g_pids, "g_pids")
    q_camids, g_camids = _as_ids(q_camids, "q_camids"), _as_ids(g_camids, "g_camids")
    dist = build_dist(query_feat, gallery_feat, metric)
    os.makedirs(output_dir, exist_ok=True)
    out: dict = {}
    out["rank_lists"] = save_rank_lists(
        dist,
        q_pids,
        g_pids,
        q_camids,
        g_camids,
        query_images,
        gallery_images,
        os.path.join(output_dir, "rank_lists"),
        num_vis,
        rank_sort,
        max_rank,
    )
    cmc, ap, _ = evaluate_rank(dist, q_pids, g_pids, q_camids, g_camids, max_rank=max(max_rank, 50))
    label = f"Rank-1 {cmc[0] * 100:.1f}%, mAP {np.mean(ap) * 100:.1f}%"
    out["cmc"] = plot_cmc(cmc, os.path.join(output_dir, "cmc.png"), label=label)
    scores, labels = evaluate_roc(dist, q_pids, g_pids, q_camids, g_camids)
    # the usual verification reading: a true match is "positive", accepted when its distance is small
    fpr, tpr, _ = roc_curve(1 - labels, -scores)
    out["roc"] = plot_roc(fpr, tpr, os.path.join(output_dir, "roc.png"), label=metric)
    pos, neg = scores[labels == 0], scores[labels == 1]
    if len(neg) > max_hist_pairs:
        neg = np.random.default_rng(seed).choice(neg, max_hist_pairs, replace=False)
    out["distance_hist"] = plot_distance_histogram(pos, neg, os.path.join(output_dir, "distance_hist.png"))
    return out
