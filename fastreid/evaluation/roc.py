"""ROC of verification over query-gallery pairs, upstream's ``evaluate_roc`` conventions.

Pairs follow the ranking protocol: gallery items with the query's pid and camid are dropped. As upstream,
``evaluate_roc`` returns ``scores`` (the distances) and ``labels`` with **0 for a true match and 1 for a
non-match**, and upstream's reported ``TPR@FPR=x`` is ``sklearn.metrics.roc_curve(labels, scores)`` read
at the point whose FPR is nearest to ``x``: i.e. with "positive" meaning *non-match* and the distance as
score. :func:`tpr_at_fpr` reproduces those numbers streaming over the distance matrix, without building
the score arrays (which hold every query-gallery pair).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from fastreid.utils.pairwise import default_chunk_rows
from fastreid.utils.visualizer import roc_curve

from .rank import RankAccumulator, _as_ids

__all__ = ["evaluate_roc", "evaluate_roc_py", "roc_curve", "tpr_at_fpr"]

DEFAULT_FPRS = (1e-4, 1e-3, 1e-2)


def _rows(distmat, s, e):
    chunk = distmat[s:e]
    if isinstance(chunk, torch.Tensor):
        return chunk.detach().cpu().to(torch.float32).numpy()
    return np.asarray(chunk, dtype=np.float32)


def evaluate_roc(
    distmat, q_pids, g_pids, q_camids, g_camids, use_cython: bool = True, *, keep_same_camera: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """``(scores, labels)``: distances of all true-match pairs (label 0) followed by all non-match pairs
    (label 1), queries in order and, within a query, gallery items in index order (float32 arrays).

    ``use_cython`` is accepted for upstream's call signature and ignored (no compiled code here)."""
    qp, qc = _as_ids(q_pids, "q_pids"), _as_ids(q_camids, "q_camids")
    gp, gc = _as_ids(g_pids, "g_pids"), _as_ids(g_camids, "g_camids")
    pos, neg = [], []
    step = default_chunk_rows(distmat.shape[1])
    for s in range(0, distmat.shape[0], step):
        d = _rows(distmat, s, s + step)
        same = gp[None, :] == qp[s : s + step, None]
        junk = same & (gc[None, :] == qc[s : s + step, None]) & (not keep_same_camera)
        pos.append(d[same & ~junk])
        neg.append(d[~same])
    pos_all, neg_all = np.concatenate(pos), np.concatenate(neg)
    scores = np.concatenate([pos_all, neg_all])
    labels = np.concatenate([np.zeros(len(pos_all), np.float32), np.ones(len(neg_all), np.float32)])
    return scores, labels


def evaluate_roc_py(distmat, q_pids, g_pids, q_camids, g_camids) -> tuple[np.ndarray, np.ndarray]:
    """Upstream's pure-Python entry point of :func:`evaluate_roc`."""
    return evaluate_roc(distmat, q_pids, g_pids, q_camids, g_camids)


def tpr_at_fpr(
    distmat,
    q_pids,
    g_pids,
    q_camids,
    g_camids,
    fprs: Sequence[float] = DEFAULT_FPRS,
    keep_same_camera: bool = False,
) -> dict[float, float]:
    """Upstream's ``TPR@FPR`` values, computed in two streaming passes over ``distmat``.

    The FPR axis counts true matches (sorted distances, a small array); the TPR is the share of non-match
    pairs at or beyond the chosen threshold, counted chunk by chunk. Equal to reading
    ``roc_curve(*evaluate_roc(...))`` at the FPR nearest each target when distances have no exact ties.
    """
    qp, qc = _as_ids(q_pids, "q_pids"), _as_ids(q_camids, "q_camids")
    acc = RankAccumulator(g_pids, g_camids, max_rank=1, keep_same_camera=keep_same_camera)
    (prows, pcols), (jrows, jcols) = acc.same_pid_pairs(qp, qc)
    pos = np.empty(len(prows), np.float32)
    junk = np.empty(len(jrows), np.float32)
    step = default_chunk_rows(distmat.shape[1])
    for s in range(0, distmat.shape[0], step):
        d = _rows(distmat, s, s + step)
        m = (prows >= s) & (prows < s + step)
        pos[m] = d[prows[m] - s, pcols[m]]
        m = (jrows >= s) & (jrows < s + step)
        junk[m] = d[jrows[m] - s, jcols[m]]
    num_pos = len(pos)
    num_neg = distmat.shape[0] * distmat.shape[1] - num_pos - len(junk)
    if num_pos == 0 or num_neg == 0:
        raise ValueError("ROC needs both true-match and non-match pairs")
    desc = np.sort(pos)[::-1]
    thresholds = {}
    for target in fprs:
        lo = int(np.floor(target * num_pos))
        cands = [c for c in (lo, lo + 1) if 0 <= c <= num_pos]
        k = min(cands, key=lambda c: (abs(c / num_pos - target), c))
        thresholds[target] = np.inf if k == 0 else float(desc[k - 1])
    counts = dict.fromkeys(fprs, 0)
    for s in range(0, distmat.shape[0], step):
        d = _rows(distmat, s, s + step)
        for target, thr in thresholds.items():
            if np.isfinite(thr):
                counts[target] += int(np.count_nonzero(d >= thr))
    out = {}
    for target, thr in thresholds.items():
        if not np.isfinite(thr):
            out[target] = 0.0
            continue
        nonmatch_ge = counts[target] - int((pos >= thr).sum()) - int((junk >= thr).sum())
        out[target] = nonmatch_ge / num_neg
    return out
