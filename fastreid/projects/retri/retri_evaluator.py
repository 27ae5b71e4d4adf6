"""Retrieval evaluation: Recall@K (upstream FastRetri's ``recall_at_ks`` and ``RetriEvaluator``)
and mAP@R.

Each query is searched among the gallery by cosine similarity (the evaluator) or Euclidean
distance; when there is no gallery (CUB, Cars-196, SOP: the test set searches itself) each
image is a query against all the others, never against itself.

- **Recall@K**: the percentage of queries with at least one image of their class among their K
  nearest, rounded to 2 decimals as upstream rounds it. A K beyond the number of candidates
  counts them all (upstream's faiss search pads with index -1 there, which reads the last gallery
  label).
- **mAP@R** (Musgrave, Belongie and Lim, "A Metric Learning Reality Check", ECCV 2020): for a query
  with R images of its class among the candidates, the mean over its R nearest of the precision
  at each rank that holds one of them, ``(1/R) sum_{i<=R} P(i) rel(i)``; averaged over the queries
  with R > 0, in percent, rounded to 2 decimals.

Similarities are computed in query chunks (never a whole query x gallery matrix), in float32 as
upstream's faiss index does (float64 when the features are). Ties are ranked in no fixed order.
"""

from __future__ import annotations

import copy
import logging
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Optional, Union

import numpy as np
import torch
import torch.nn.functional as F

from fastreid.evaluation.evaluator import DatasetEvaluator
from fastreid.utils import comm
from fastreid.utils.pairwise import default_chunk_rows

from .config import DEFAULT_RECALLS

__all__ = ["RetriEvaluator", "recall_at_ks", "retrieval_metrics", "label_codes"]

logger = logging.getLogger("fastreid.retri_evaluator")

Labels = Union[np.ndarray, torch.Tensor, Sequence[Any]]


def label_codes(*label_lists: Labels) -> list[np.ndarray]:
    """The labels of each list as int64 codes, equal codes for equal labels across the lists
    (labels may be ints, strings such as ``"cub_12"``, numpy or torch arrays)."""
    index: dict[Any, int] = {}
    out = []
    for labels in label_lists:
        values = labels.tolist() if isinstance(labels, (np.ndarray, torch.Tensor)) else list(labels)
        out.append(np.array([index.setdefault(v, len(index)) for v in values], dtype=np.int64))
    return out


def _as_features(x: Union[torch.Tensor, np.ndarray], name: str) -> torch.Tensor:
    t = torch.from_numpy(np.ascontiguousarray(x)) if isinstance(x, np.ndarray) else x
    if not isinstance(t, torch.Tensor) or t.dim() != 2:
        raise ValueError(
            f"{name} must be a 2-D tensor (images x feature dim), got {getattr(t, 'shape', t)!r}"
        )
    t = t.detach().cpu()
    return t if t.dtype == torch.float64 else t.float()


@torch.no_grad()
def retrieval_metrics(
    query_features: Union[torch.Tensor, np.ndarray],
    query_labels: Labels,
    ks: Sequence[int],
    gallery_features: Optional[Union[torch.Tensor, np.ndarray]] = None,
    gallery_labels: Optional[Labels] = None,
    cosine: bool = True,
    chunk_rows: Optional[int] = None,
) -> dict[str, Any]:
    """Unrounded fractions: ``{"recall": {k: fraction of queries hit within k}, "map_at_r": mean
    over the queries with a relevant candidate, "num_queries", "num_without_match"}``.

    Without ``gallery_features`` / ``gallery_labels`` (both or neither) the queries search
    themselves, leaving each query out of its own candidates."""
    ks = [int(k) for k in ks]
    if not ks or min(ks) < 1:
        raise ValueError(f"Recall@K needs K >= 1, got {ks} (config key TEST.RECALLS)")
    if (gallery_features is None) != (gallery_labels is None):
        raise ValueError("gallery_features and gallery_labels needs to be both None or both given")
    self_search = gallery_features is None
    query = _as_features(query_features, "query_features")
    gallery = query if gallery_features is None else _as_features(gallery_features, "gallery_features")
    if gallery.dtype != query.dtype:
        query, gallery = query.double(), gallery.double()
    if query.shape[1] != gallery.shape[1]:
        raise ValueError(f"query features have {query.shape[1]} dims, gallery features {gallery.shape[1]}")
    q_codes, g_codes = label_codes(query_labels, query_labels if gallery_labels is None else gallery_labels)
    if len(q_codes) != len(query) or len(g_codes) != len(gallery):
        raise ValueError(
            f"{len(query)} query features for {len(q_codes)} labels, {len(gallery)} gallery features "
            f"for {len(g_codes)} labels: one label per feature row"
        )
    num_candidates = len(gallery) - 1 if self_search else len(gallery)
    if len(query) == 0 or num_candidates < 1:
        raise ValueError(
            f"retrieval needs queries and candidates: {len(query)} queries, {num_candidates} candidates"
        )

    if cosine:
        query, gallery = F.normalize(query, p=2, dim=1), F.normalize(gallery, p=2, dim=1)
        g_sq = None
    else:
        g_sq = gallery.pow(2).sum(dim=1)

    # R of each query: the candidates of its class
    counts = np.bincount(g_codes, minlength=int(max(q_codes.max(), g_codes.max())) + 1)
    relevant = counts[q_codes] - (1 if self_search else 0)
    max_k = max(ks)
    g_codes_t = torch.from_numpy(g_codes)
    hits_within = dict.fromkeys(ks, 0)
    ap_sum = 0.0
    rows = chunk_rows or default_chunk_rows(len(gallery))
    for start in range(0, len(query), rows):
        end = min(start + rows, len(query))
        score = query[start:end] @ gallery.T  # larger is nearer
        if g_sq is not None:  # minus the squared Euclidean distance, less the query's own norm
            score = 2 * score - g_sq[None, :]
        if self_search:
            idx = torch.arange(start, end)
            score[idx - start, idx] = -torch.inf
        r_chunk = relevant[start:end]
        depth = min(num_candidates, max(max_k, int(r_chunk.max())))
        nearest = score.topk(depth, dim=1, largest=True, sorted=True).indices
        hits = (g_codes_t[nearest] == torch.from_numpy(q_codes[start:end])[:, None]).numpy()
        for k in ks:
            hits_within[k] += int(hits[:, : min(k, depth)].any(axis=1).sum())
        r = torch.from_numpy(r_chunk)
        ranks = torch.arange(1, depth + 1)
        within_r = (ranks[None, :] <= r[:, None]).numpy()
        relevant_hits = hits & within_r
        precision = np.cumsum(relevant_hits, axis=1) / ranks.numpy()[None, :]
        has = r_chunk > 0
        ap = (precision * relevant_hits).sum(axis=1)[has] / r_chunk[has]
        ap_sum += float(ap.sum())

    num_with = int((relevant > 0).sum())
    return {
        "recall": {k: hits_within[k] / len(query) for k in ks},
        "map_at_r": ap_sum / num_with if num_with else 0.0,
        "num_queries": len(query),
        "num_without_match": len(query) - num_with,
    }


def recall_at_ks(
    query_features: Union[torch.Tensor, np.ndarray],
    query_labels: Labels,
    ks: Sequence[int],
    gallery_features: Optional[Union[torch.Tensor, np.ndarray]] = None,
    gallery_labels: Optional[Labels] = None,
    cosine: bool = False,
) -> dict[int, float]:
    """Upstream's function: ``{k: Recall@k in percent, rounded to 2 decimals}``; the queries search
    themselves (leaving each one out) when no gallery is given. Euclidean unless ``cosine``."""
    result = retrieval_metrics(query_features, query_labels, ks, gallery_features, gallery_labels, cosine)
    return {k: round(v * 100, 2) for k, v in result["recall"].items()}


class RetriEvaluator(DatasetEvaluator):
    """Upstream's ``RetriEvaluator(cfg, num_query, output_dir)``: collects the model's features and
    the batches' ``targets``; ``evaluate()`` returns ``Recall@K`` for each K of ``TEST.RECALLS``,
    ``mAP@R``, and ``metric`` (Recall@ the first K), in percent. The first ``num_query`` images are
    the queries and the rest the gallery; when every image is a query (``num_query`` equals the
    number of images) the test set searches itself. Cosine similarity, as upstream's."""

    def __init__(self, cfg: Any, num_query: int, output_dir: Optional[str] = None) -> None:
        self.cfg = cfg
        self._num_query = int(num_query)
        self._output_dir = output_dir
        self.recalls = [int(k) for k in cfg.TEST.get("RECALLS", DEFAULT_RECALLS)]
        if not self.recalls:
            raise ValueError("TEST.RECALLS is empty: list the K of Recall@K, e.g. [1, 2, 4, 8]")
        self.features: list[torch.Tensor] = []
        self.labels: list[Any] = []

    def reset(self) -> None:
        self.features = []
        self.labels = []

    def process(self, inputs: dict, outputs: torch.Tensor) -> None:
        targets = inputs["targets"]
        labels = targets.tolist() if isinstance(targets, torch.Tensor) else list(targets)
        features = outputs.detach().cpu()
        if features.dim() != 2 or features.shape[0] != len(labels):
            raise ValueError(
                f"RetriEvaluator.process: {tuple(features.shape)} features for {len(labels)} targets; "
                "the model must return one feature row per image in eval mode"
            )
        self.features.append(features)
        self.labels.extend(labels)

    def evaluate(self) -> dict:
        features = torch.cat(self.features) if self.features else torch.empty(0, 0)
        labels = list(self.labels)
        if comm.get_world_size() > 1:
            comm.synchronize()
            gathered = comm.gather_rows(features)
            parts = comm.gather(labels, dst=0)
            if gathered is None or not comm.is_main_process():
                return {}
            features, labels = gathered, [label for part in parts for label in part]
        if len(labels) == 0:
            raise RuntimeError("RetriEvaluator.evaluate: no predictions; was process() called?")
        nq = self._num_query
        if not 0 < nq <= len(labels):
            raise ValueError(f"num_query={nq} but {len(labels)} images were evaluated")
        if nq == len(labels):
            result = retrieval_metrics(features, labels, self.recalls, cosine=True)
        else:
            result = retrieval_metrics(
                features[:nq], labels[:nq], self.recalls, features[nq:], labels[nq:], cosine=True
            )
        if result["num_without_match"]:
            logger.warning(
                f"{result['num_without_match']} of {result['num_queries']} queries have no image of their "
                "class to find: they count as misses in Recall@K and are left out of mAP@R"
            )
        results: OrderedDict = OrderedDict()
        for k in self.recalls:
            results[f"Recall@{k}"] = round(result["recall"][k] * 100, 2)
        results["mAP@R"] = round(result["map_at_r"] * 100, 2)
        results["metric"] = results[f"Recall@{self.recalls[0]}"]
        return copy.deepcopy(results)
