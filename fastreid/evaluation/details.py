"""Per-query details of one evaluation, kept for the report: each query's top-k gallery matches,
the rank of its first true match, its AP, and the distance histograms of true and false pairs.

Computed in one chunked pass over the query x gallery distances (the evaluator's own chunking), so
memory stays bounded for large galleries: per query only the top ``k`` entries are kept, and the
distances of all pairs only as two histograms on shared bin edges (from which the ROC curve
follows). The gallery entries Market-1501's protocol ignores (same identity, same camera) are left
out of rankings and histograms, as in the metrics.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from fastreid.utils.atomic import atomic_write

__all__ = ["DETAILS_FILE", "EvaluationDetails", "compute_details"]

DETAILS_FILE = "evaluation_details.npz"
HIST_BINS = 200


@dataclass
class EvaluationDetails:
    """What the report shows of one evaluation. Arrays are per query unless named ``g_*``."""

    metric: str
    q_pids: np.ndarray
    q_camids: np.ndarray
    q_paths: list[str]
    g_pids: np.ndarray
    g_camids: np.ndarray
    g_paths: list[str]
    ap: np.ndarray  # average precision, 0..1
    first_match: np.ndarray  # 0-based rank of the first true match, -1 when the query has none
    topk_index: np.ndarray  # num_query x k gallery indices, nearest first (-1 past the end)
    topk_dist: np.ndarray  # num_query x k distances (inf past the end)
    cmc: np.ndarray  # the evaluator's CMC, 0..1
    hist_edges: np.ndarray  # HIST_BINS + 1 edges shared by both histograms
    pos_hist: np.ndarray  # counts of true-match distances
    neg_hist: np.ndarray  # counts of false-match distances
    dataset: str = ""  # the test set's name, when the evaluator knows it

    def roc(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(fpr, tpr, thresholds)``: accepting pairs with distance <= threshold, at each bin edge."""
        tpr = np.concatenate([[0.0], np.cumsum(self.pos_hist) / max(1, int(self.pos_hist.sum()))])
        fpr = np.concatenate([[0.0], np.cumsum(self.neg_hist) / max(1, int(self.neg_hist.sum()))])
        return fpr, tpr, self.hist_edges

    def save(self, path: str) -> str:
        """Write to ``path`` (``.npz``) atomically; returns the path."""
        meta = {
            "metric": self.metric,
            "dataset": self.dataset,
            "q_paths": list(self.q_paths),
            "g_paths": list(self.g_paths),
        }
        arrays: dict[str, Any] = {k: v for k, v in vars(self).items() if isinstance(v, np.ndarray)}
        arrays["meta"] = np.array(json.dumps(meta))
        atomic_write(path, lambda f: np.savez_compressed(f, **arrays))
        return path

    @classmethod
    def load(cls, path: str) -> EvaluationDetails:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            arrays = {k: data[k] for k in data.files if k != "meta"}
        return cls(
            metric=meta["metric"],
            dataset=str(meta.get("dataset", "")),  # files written before the name was kept have none
            q_paths=meta["q_paths"],
            g_paths=meta["g_paths"],
            **arrays,
        )

    def has_images(self) -> bool:
        """Whether the evaluation recorded the image files (thumbnails can be shown)."""
        return any(self.q_paths) or any(self.g_paths)


def _upper_bound(qf: torch.Tensor, gf: torch.Tensor, metric: str) -> float:
    """The largest distance two of these rows can have (the histograms' range)."""
    if metric == "cosine":
        return 2.0
    return float((qf.norm(dim=1).max() + gf.norm(dim=1).max()) ** 2)


def _per_query_ap(ap: np.ndarray, first_match: np.ndarray) -> np.ndarray:
    """``ap`` as one value per query: as given, or scattered onto the queries that have a true
    match (NaN elsewhere) when it holds one value per such query."""
    if len(ap) == len(first_match):
        return ap
    answered = first_match >= 0
    if len(ap) != int(answered.sum()):
        raise ValueError(
            f"{len(ap)} AP values for {len(first_match)} queries of which {int(answered.sum())} have a true "
            "match; give one AP per query or one per query with a true match"
        )
    full = np.full(len(first_match), np.nan)
    full[answered] = ap
    return full


@torch.no_grad()
def compute_details(
    dist_chunks: Iterable[tuple[int, int, torch.Tensor]],
    qf: torch.Tensor,
    gf: torch.Tensor,
    q_pids: np.ndarray,
    g_pids: np.ndarray,
    q_camids: np.ndarray,
    g_camids: np.ndarray,
    q_paths: Sequence[str],
    g_paths: Sequence[str],
    ap: np.ndarray,
    cmc: np.ndarray,
    metric: str,
    k: int = 10,
    keep_same_camera: bool = False,
    dist_range: tuple[float, float] | None = None,
    dataset: str = "",
) -> EvaluationDetails:
    """Details from ``dist_chunks`` (``(start, end, dist[start:end])`` row chunks of the query x
    gallery distances, e.g. from :func:`fastreid.utils.pairwise.iter_dist_chunks`, or a re-ranked
    matrix cut into rows). ``ap`` and ``cmc`` are the evaluator's: ``ap`` holds one value per query,
    or (as :func:`~fastreid.evaluation.rank.evaluate_rank` returns it) one per query that has a true
    match, in query order; the queries without one get NaN. ``q_paths`` / ``g_paths`` may be empty
    strings (no thumbnails). ``dist_range`` fixes the histograms' range (default: 0 to the largest
    distance these features can have)."""
    nq, ng = len(q_pids), len(g_pids)
    if len(q_paths) != nq or len(g_paths) != ng:
        raise ValueError(
            f"{len(q_paths)} query and {len(g_paths)} gallery paths for {nq} queries and {ng} gallery items"
        )
    k = max(1, min(k, ng))
    low, high = dist_range if dist_range is not None else (0.0, _upper_bound(qf, gf, metric))
    edges = np.linspace(low, high if high > low else low + 1.0, HIST_BINS + 1)
    pos_hist = np.zeros(HIST_BINS, np.int64)
    neg_hist = np.zeros(HIST_BINS, np.int64)
    topk_index = np.full((nq, k), -1, np.int64)
    topk_dist = np.full((nq, k), np.inf, np.float32)
    first_match = np.full(nq, -1, np.int64)
    gp, gc = torch.from_numpy(np.asarray(g_pids)), torch.from_numpy(np.asarray(g_camids))
    for start, end, dist in dist_chunks:
        dist = torch.as_tensor(dist, dtype=torch.float32)
        qp = torch.from_numpy(np.asarray(q_pids[start:end]))[:, None]
        qc = torch.from_numpy(np.asarray(q_camids[start:end]))[:, None]
        same_id = gp[None, :] == qp
        valid = torch.ones_like(same_id) if keep_same_camera else ~(same_id & (gc[None, :] == qc))
        ranked = dist.masked_fill(~valid, float("inf"))
        values, index = torch.topk(ranked, k, dim=1, largest=False, sorted=True)
        index[torch.isinf(values)] = -1
        topk_index[start:end], topk_dist[start:end] = index.numpy(), values.numpy()
        true_match = same_id & valid
        nearest_true = ranked.masked_fill(~true_match, float("inf")).min(dim=1).values
        closer = (ranked < nearest_true[:, None]).sum(dim=1)
        first_match[start:end] = torch.where(torch.isinf(nearest_true), -1, closer).numpy()
        d = dist.clamp(float(edges[0]), float(edges[-1]))
        pos_hist += np.histogram(d[true_match].numpy(), edges)[0]
        neg_hist += np.histogram(d[valid & ~same_id].numpy(), edges)[0]
    return EvaluationDetails(
        metric=metric,
        dataset=dataset,
        q_pids=np.asarray(q_pids),
        q_camids=np.asarray(q_camids),
        q_paths=[str(p) for p in q_paths],
        g_pids=np.asarray(g_pids),
        g_camids=np.asarray(g_camids),
        g_paths=[str(p) for p in g_paths],
        ap=_per_query_ap(np.asarray(ap, np.float64).reshape(-1), first_match),
        first_match=first_match,
        topk_index=topk_index,
        topk_dist=topk_dist,
        cmc=np.asarray(cmc, np.float64),
        hist_edges=edges,
        pos_hist=pos_hist,
        neg_hist=neg_hist,
    )
