"""Retrieval accuracy of a feature extractor (any backend) on a labelled query / gallery set: what
``fastreid-export --quantize int8`` compares between the fp32 and the int8 model, and what the
inference benchmark prints beside each backend's speed.

The labelled set is a config's test set (``DATASETS.TESTS[0]``: its ``query`` and ``gallery`` as
the evaluation reads them) or two folders named like Market-1501 (``0002_c1s1_000451_03.jpg``:
person 2, camera 1; person -1 is junk and left out of the gallery, as the data set does). Metrics
are the evaluation's (:func:`fastreid.evaluation.rank.evaluate_rank_from_features` with
``TEST.METRIC``), in percent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import torch
import torch.nn.functional as F

from fastreid.config import CfgNode
from fastreid.data.build import datasets_root
from fastreid.data.datasets import DATASET_REGISTRY
from fastreid.data.datasets.bases import DatasetNotFoundError
from fastreid.evaluation.rank import evaluate_rank_from_features

from .inputs import list_image_files
from .search import market_labels

__all__ = ["LabelledImages", "RetrievalResult", "cosine_to", "labelled_test_set", "retrieval_metrics"]


@dataclass
class LabelledImages:
    """Image paths with their person and camera ids."""

    paths: list[str]
    pids: np.ndarray
    camids: np.ndarray

    def __len__(self) -> int:
        return len(self.paths)

    @classmethod
    def from_items(cls, items: Sequence[tuple]) -> LabelledImages:
        """From a data set's ``(path, pid, camid)`` items."""
        return cls(
            [str(item[0]) for item in items],
            np.asarray([int(item[1]) for item in items], np.int64),
            np.asarray([int(item[2]) for item in items], np.int64),
        )

    @classmethod
    def from_market_names(cls, specs: Sequence[str], drop_junk: bool = False) -> LabelledImages:
        """Images of folders / globs / lists named like Market-1501; ``drop_junk``: leave out person -1."""
        paths = list_image_files(list(specs))
        pids, camids = market_labels(paths)
        keep = pids != -1 if drop_junk else np.ones(len(paths), bool)
        return cls([p for p, k in zip(paths, keep) if k], pids[keep], camids[keep])


def labelled_test_set(
    cfg: CfgNode, query: Optional[Sequence[str]] = None, gallery: Optional[Sequence[str]] = None
) -> tuple[LabelledImages, LabelledImages, str]:
    """``(query, gallery, description)``: the folders given (both, Market-1501 names), else the
    query and gallery of ``DATASETS.TESTS[0]`` under ``$FASTREID_DATASETS``."""
    if bool(query) != bool(gallery):
        raise DatasetNotFoundError(
            "give both --check-query and --check-gallery, or neither (the config's test set)"
        )
    if query and gallery:
        q = LabelledImages.from_market_names(query)
        g = LabelledImages.from_market_names(gallery, drop_junk=True)
        return q, g, f"{', '.join(query)} / {', '.join(gallery)}"
    if not cfg.DATASETS.TESTS:
        raise DatasetNotFoundError(
            "DATASETS.TESTS is empty: pass --check-query and --check-gallery folders (Market-1501 names)"
        )
    name = cfg.DATASETS.TESTS[0]
    data = DATASET_REGISTRY.get(name)(root=datasets_root())
    return (
        LabelledImages.from_items(data.query),
        LabelledImages.from_items(data.gallery),
        f"{name} under {datasets_root()}",
    )


@dataclass
class RetrievalResult:
    """Metrics in percent and the features they came from (query rows first)."""

    metrics: dict[str, float]
    features: torch.Tensor


def retrieval_metrics(
    extractor: Any, query: LabelledImages, gallery: LabelledImages, metric: Optional[str] = None
) -> RetrievalResult:
    """Rank-1/5/10, mAP and mINP (percent) of ``extractor``'s features (a
    :class:`~fastreid.inference.FeatureExtractor`, any backend) on ``query`` against ``gallery``,
    with ``metric`` (default ``TEST.METRIC`` of its config)."""
    feats = extractor(query.paths + gallery.paths)
    nq = len(query)
    cmc, ap, inp = evaluate_rank_from_features(
        feats[:nq],
        feats[nq:],
        query.pids,
        gallery.pids,
        query.camids,
        gallery.camids,
        metric=metric or extractor.cfg.TEST.METRIC,
    )
    metrics = {f"Rank-{r}": float(cmc[r - 1]) * 100 for r in (1, 5, 10) if r <= len(cmc)}
    metrics["mAP"] = float(np.mean(ap)) * 100
    metrics["mINP"] = float(np.mean(inp)) * 100
    return RetrievalResult(metrics, feats)


def cosine_to(reference: torch.Tensor, other: torch.Tensor) -> tuple[float, float]:
    """``(smallest, mean)`` cosine similarity between matching rows, computed in float64."""
    cos = F.cosine_similarity(reference.double(), other.double(), dim=1)
    return float(cos.min()), float(cos.mean())
