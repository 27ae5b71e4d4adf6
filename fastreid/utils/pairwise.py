"""Pairwise distances between feature sets, whole or in row chunks: the arithmetic shared by
``compute_dist`` (upstream's API), the k-reciprocal code and the evaluator.

- ``"euclidean"``: the *squared* Euclidean distance ``|a|^2 + |b|^2 - 2 a.b`` (no square root, may be
  slightly negative from rounding), as upstream returns it;
- ``"cosine"``: ``1 - cos(a, b)`` computed on L2-normalised rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Union

import numpy as np
import torch
import torch.nn.functional as F

__all__ = [
    "METRICS",
    "as_float_tensor",
    "check_metric",
    "default_chunk_rows",
    "dist_chunk",
    "iter_dist_chunks",
    "prepare",
]

METRICS = ("cosine", "euclidean", "jaccard")

ArrayLike = Union[torch.Tensor, np.ndarray]


def as_float_tensor(x: ArrayLike, name: str = "features") -> torch.Tensor:
    """A 2-D float32 CPU tensor view of ``x`` (numpy or torch)."""
    t = torch.from_numpy(np.ascontiguousarray(x)) if isinstance(x, np.ndarray) else x
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or numpy array, got {type(x).__name__}")
    if t.dim() != 2:
        raise ValueError(f"{name} must be 2-D (num_items x dim), got shape {tuple(t.shape)}")
    return t.detach().to("cpu", torch.float32)


def check_metric(metric: str) -> str:
    if metric not in METRICS:
        raise ValueError(
            f"Unknown distance metric {metric!r}; expected one of {METRICS} (config key TEST.METRIC)"
        )
    return metric


def prepare(feat: torch.Tensor, metric: str) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Normalised rows for cosine, or the rows and their squared norms for euclidean."""
    if metric == "cosine":
        return F.normalize(feat, p=2, dim=1), None
    return feat, feat.pow(2).sum(dim=1)


def dist_chunk(
    a: torch.Tensor, b: torch.Tensor, metric: str, a_sq: torch.Tensor | None, b_sq: torch.Tensor | None
) -> torch.Tensor:
    """Distances between already prepared rows (see ``prepare``)."""
    sim = torch.mm(a, b.t())
    if metric == "cosine":
        return sim.neg_().add_(1.0)
    assert a_sq is not None and b_sq is not None, "euclidean needs the squared norms from prepare()"
    return sim.mul_(-2.0).add_(a_sq[:, None]).add_(b_sq[None, :])


def default_chunk_rows(num_cols: int, budget_elems: int = 8 * 1024 * 1024) -> int:
    """Rows per chunk so that a chunk holds about ``budget_elems`` distances (32 MB in float32)."""
    return max(1, min(4096, budget_elems // max(1, num_cols)))


@torch.no_grad()
def iter_dist_chunks(
    feat_1: ArrayLike, feat_2: ArrayLike, metric: str = "euclidean", chunk_rows: int | None = None
) -> Iterator[tuple[int, int, torch.Tensor]]:
    """Yield ``(start, end, dist[start:end])`` row chunks of the ``feat_1`` x ``feat_2`` distances."""
    check_metric(metric)
    if metric == "jaccard":
        raise ValueError("jaccard distances cannot be chunked; use build_dist(..., metric='jaccard')")
    f1, f2 = as_float_tensor(feat_1, "feat_1"), as_float_tensor(feat_2, "feat_2")
    if f1.shape[1] != f2.shape[1]:
        raise ValueError(f"feature dims differ: {f1.shape[1]} vs {f2.shape[1]}")
    a, a_sq = prepare(f1, metric)
    b, b_sq = prepare(f2, metric)
    rows = chunk_rows or default_chunk_rows(b.shape[0])
    for start in range(0, a.shape[0], rows):
        end = min(start + rows, a.shape[0])
        yield start, end, dist_chunk(a[start:end], b, metric, None if a_sq is None else a_sq[start:end], b_sq)
