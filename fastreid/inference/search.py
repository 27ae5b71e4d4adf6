"""Nearest gallery features with faiss: exact (``IndexFlatIP`` / ``IndexFlatL2``) or approximate
(IVF, HNSW), with the approximate index's recall measured against the exact one.

Distances are the evaluation's (``fastreid.utils.compute_dist``): cosine ``1 - cos`` on
L2-normalised rows, euclidean the squared L2 distance.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Optional

import numpy as np

from fastreid.utils.errors import UserError

__all__ = [
    "GalleryIndex",
    "IndexSpec",
    "SearchIndexError",
    "market_labels",
    "rank_accuracy",
    "recall_against_exact",
]

logger = logging.getLogger(__name__)

METRICS = ("cosine", "euclidean")
INDEX_TYPES = ("flat", "ivf", "hnsw")
#: ``auto`` uses an exact index below this many gallery vectors and HNSW above.
AUTO_EXACT_LIMIT = 200_000


class SearchIndexError(UserError, ValueError):
    """A search index that cannot be built, opened or queried as asked."""


def _faiss():
    import faiss

    return faiss


@dataclass
class IndexSpec:
    """How the index is built: ``kind`` flat / ivf / hnsw (or auto), the IVF cells ``nlist`` (0:
    about 4 sqrt(N)) and cells probed ``nprobe``, HNSW's ``hnsw_m`` links and ``ef_search``."""

    metric: str = "cosine"
    kind: str = "flat"
    nlist: int = 0
    nprobe: int = 16
    hnsw_m: int = 32
    ef_search: int = 128
    ef_construction: int = 80

    def resolved(self, count: int) -> IndexSpec:
        if self.metric not in METRICS:
            raise SearchIndexError(f"metric {self.metric!r}: expected one of {', '.join(METRICS)}")
        kind = self.kind
        if kind == "auto":
            kind = "flat" if count < AUTO_EXACT_LIMIT else "hnsw"
        if kind not in INDEX_TYPES:
            raise SearchIndexError(
                f"index type {self.kind!r}: expected auto or one of {', '.join(INDEX_TYPES)}"
            )
        nlist = self.nlist or max(1, min(count // 39, int(4 * math.sqrt(count))))
        return IndexSpec(
            self.metric, kind, nlist, self.nprobe, self.hnsw_m, self.ef_search, self.ef_construction
        )


def _prepare(feats: np.ndarray, metric: str) -> np.ndarray:
    if metric != "cosine":
        return np.ascontiguousarray(feats, dtype=np.float32)
    x = np.array(feats, dtype=np.float32, order="C", copy=True)  # normalised in place: never the caller's
    _faiss().normalize_L2(x)
    return x


class GalleryIndex:
    """A faiss index over gallery features, with the gallery's file names.

    ``GalleryIndex.build(feats, files, IndexSpec(...))``; ``search(queries, k) -> (dist, idx)``;
    ``save(path)`` writes ``path`` (faiss) plus ``path.json`` (how it was built) and
    ``path.files.txt``; ``GalleryIndex.open(path)`` reads them back.
    """

    def __init__(self, index, spec: IndexSpec, files: Sequence[str]) -> None:
        self.index = index
        self.spec = spec
        self.files = list(files)

    @property
    def size(self) -> int:
        return int(self.index.ntotal)

    @property
    def exact(self) -> bool:
        return self.spec.kind == "flat"

    @classmethod
    def build(
        cls, feats: np.ndarray, files: Sequence[str] = (), spec: Optional[IndexSpec] = None
    ) -> GalleryIndex:
        faiss = _faiss()
        if feats.ndim != 2 or len(feats) == 0:
            raise SearchIndexError(
                f"gallery features must be a non-empty N x D array, got shape {feats.shape}"
            )
        spec = (spec or IndexSpec()).resolved(len(feats))
        x = _prepare(feats, spec.metric)
        dim = x.shape[1]
        metric = faiss.METRIC_INNER_PRODUCT if spec.metric == "cosine" else faiss.METRIC_L2
        if spec.kind == "flat":
            index = faiss.IndexFlatIP(dim) if spec.metric == "cosine" else faiss.IndexFlatL2(dim)
        elif spec.kind == "ivf":
            quantizer = faiss.IndexFlatIP(dim) if spec.metric == "cosine" else faiss.IndexFlatL2(dim)
            index = faiss.IndexIVFFlat(quantizer, dim, spec.nlist, metric)
            train = x
            if len(x) > spec.nlist * 64:  # k-means needs ~39+ points per cell; more only slows training
                rng = np.random.default_rng(0)
                train = x[np.sort(rng.choice(len(x), spec.nlist * 64, replace=False))]
            index.train(train)
            index.nprobe = min(spec.nprobe, spec.nlist)
        else:
            index = faiss.IndexHNSWFlat(dim, spec.hnsw_m, metric)
            index.hnsw.efConstruction = spec.ef_construction
            index.hnsw.efSearch = spec.ef_search
        index.add(x)
        if files and len(files) != len(feats):
            raise SearchIndexError(f"{len(feats)} gallery features but {len(files)} file names")
        return cls(index, spec, files)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """``(distances, indices)``, each num_queries x min(k, gallery size), nearest first."""
        if queries.ndim != 2 or queries.shape[1] != self.index.d:
            raise SearchIndexError(f"query features must be N x {self.index.d}, got shape {queries.shape}")
        k = max(1, min(int(k), self.size))
        scores, idx = self.index.search(_prepare(queries, self.spec.metric), k)
        dist = 1.0 - scores if self.spec.metric == "cosine" else scores
        return dist.astype(np.float32), idx.astype(np.int64)

    def save(self, path: str) -> list[str]:
        faiss = _faiss()
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        faiss.write_index(self.index, path)
        with open(path + ".json", "w", encoding="utf-8") as f:
            json.dump({"spec": asdict(self.spec), "size": self.size, "dim": int(self.index.d)}, f, indent=2)
        with open(path + ".files.txt", "w", encoding="utf-8") as f:
            f.writelines(p + "\n" for p in self.files)
        return [path, path + ".json", path + ".files.txt"]

    @classmethod
    def open(cls, path: str) -> GalleryIndex:
        faiss = _faiss()
        if not os.path.isfile(path) or not os.path.isfile(path + ".json"):
            raise SearchIndexError(
                f"index {path!r}: missing (or its {os.path.basename(path)}.json is); "
                "build one with --save-index"
            )
        with open(path + ".json", encoding="utf-8") as f:
            meta = json.load(f)
        try:
            index = faiss.read_index(path)
        except RuntimeError as e:
            raise SearchIndexError(f"index {path!r} cannot be read by faiss: {str(e).splitlines()[0]}") from e
        spec = IndexSpec(**meta["spec"])
        if spec.kind == "ivf":
            faiss.extract_index_ivf(index).nprobe = min(spec.nprobe, spec.nlist)
        elif spec.kind == "hnsw":
            index.hnsw.efSearch = spec.ef_search
        files_path = path + ".files.txt"
        files = []
        if os.path.isfile(files_path):
            with open(files_path, encoding="utf-8") as f:
                files = f.read().splitlines()
        return cls(index, spec, files)


def recall_against_exact(
    approx_idx: np.ndarray, exact_idx: np.ndarray, ks: Sequence[int]
) -> dict[int, float]:
    """For each k: the share of the exact top-k neighbours that the approximate top-k found
    (1.0 = the same neighbours)."""
    out = {}
    for k in ks:
        k = min(k, exact_idx.shape[1], approx_idx.shape[1])
        hits = sum(len(np.intersect1d(a[:k], e[:k])) for a, e in zip(approx_idx, exact_idx))
        out[k] = hits / float(k * len(exact_idx))
    return out


_MARKET_NAME = re.compile(r"^([-\d]+)_c(\d+)")


def market_labels(paths: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Person and camera ids from Market-1501-style file names (``0002_c1s1_000451_03.jpg``)."""
    pids, camids = [], []
    for path in paths:
        match = _MARKET_NAME.match(os.path.basename(path))
        if match is None:
            raise SearchIndexError(
                f"{path!r} is not named like Market-1501 (PPPP_cC...): no person id to evaluate"
            )
        pids.append(int(match.group(1)))
        camids.append(int(match.group(2)))
    return np.asarray(pids, np.int64), np.asarray(camids, np.int64)


def evaluation_depth(
    q_pids: np.ndarray, q_camids: np.ndarray, g_pids: np.ndarray, g_camids: np.ndarray, max_rank: int
) -> int:
    """How many neighbours to fetch so that ``max_rank`` valid ones remain after removing each
    query's junk (same person and camera) and the gallery's junk images (person id -1)."""
    junk_images = int((g_pids == -1).sum())
    pairs: dict[tuple[int, int], int] = {}
    for p, c in zip(g_pids.tolist(), g_camids.tolist()):
        pairs[(p, c)] = pairs.get((p, c), 0) + 1
    worst = max((pairs.get((p, c), 0) for p, c in zip(q_pids.tolist(), q_camids.tolist())), default=0)
    return min(len(g_pids), max_rank + worst + junk_images)


def rank_accuracy(
    idx: np.ndarray,
    q_pids: np.ndarray,
    q_camids: np.ndarray,
    g_pids: np.ndarray,
    g_camids: np.ndarray,
    ranks: Sequence[int] = (1, 5, 10),
) -> dict[str, float]:
    """``Rank-r`` (percent) from ranked neighbour lists with the evaluation's protocol: gallery
    images of the query's person and camera, and of person -1, are skipped; queries without a
    true match in another camera are left out. ``idx`` must be deep enough
    (:func:`evaluation_depth`)."""
    other_cam_match: dict[int, set[int]] = {}
    for p, c in zip(g_pids.tolist(), g_camids.tolist()):
        if p != -1:
            other_cam_match.setdefault(p, set()).add(c)
    hits = np.zeros(max(ranks), np.float64)
    valid = 0
    for row, qp, qc in zip(idx, q_pids.tolist(), q_camids.tolist()):
        if not (other_cam_match.get(qp, set()) - {qc}):
            continue
        valid += 1
        keep = row[(row >= 0)]
        keep = keep[~(((g_pids[keep] == qp) & (g_camids[keep] == qc)) | (g_pids[keep] == -1))]
        matches = np.flatnonzero(g_pids[keep[: max(ranks)]] == qp)
        if len(matches):
            hits[matches[0] :] += 1
    if valid == 0:
        raise SearchIndexError("no query has a true match in another camera: nothing to evaluate")
    return {f"Rank-{r}": float(hits[r - 1] / valid * 100) for r in ranks}
