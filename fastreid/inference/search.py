"""Nearest gallery features with faiss: exact (``IndexFlatIP`` / ``IndexFlatL2``) or approximate
(IVF, HNSW, and the compressed IVF-PQ and OPQ + IVF-PQ), with the approximate index's recall measured
against the exact one.

Distances are the evaluation's (``fastreid.utils.compute_dist``): cosine ``1 - cos`` on
L2-normalised rows, euclidean the squared L2 distance. Every index, the exact reference
(:func:`exact_search`) and the re-scoring of compressed candidates (``IndexSpec.rerank``) prepare
rows the same way (:func:`_prepare`), so their distances and neighbours compare.

Compressed indexes are built from features on disk (:meth:`GalleryIndex.build_streaming`): trained on
a sample, then filled part by part with the parts' global row numbers as ids, so the whole gallery is
never in memory; ``rerank`` re-scores the top candidates exactly from those files (memory-mapped).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Optional

import numpy as np

from fastreid.inference.shards import FeatureFileError, FeatureShards
from fastreid.utils.errors import UserError

__all__ = [
    "GalleryIndex",
    "IndexSpec",
    "SearchIndexError",
    "exact_search",
    "market_ids",
    "market_labels",
    "rank_accuracy",
    "recall_against_exact",
]

logger = logging.getLogger(__name__)

METRICS = ("cosine", "euclidean")
INDEX_TYPES = ("flat", "ivf", "hnsw", "ivfpq", "opq")
#: the compressed kinds: product-quantised codes in IVF lists (``opq``: after a learned rotation)
PQ_TYPES = ("ivfpq", "opq")
#: k-means wants at least this many training vectors per centroid (faiss warns below it)
MIN_POINTS_PER_CENTROID = 39
#: ``auto`` uses an exact index below this many gallery vectors and HNSW above.
AUTO_EXACT_LIMIT = 200_000


class SearchIndexError(UserError, ValueError):
    """A search index that cannot be built, opened or queried as asked."""


def _faiss():
    import faiss  # loads its own OpenMP runtime and takes a moment: only the search paths pay for it

    return faiss


@dataclass
class IndexSpec:
    """How the index is built: ``kind`` flat / ivf / hnsw / ivfpq / opq (or auto), the IVF cells
    ``nlist`` (0: about 4 sqrt(N)) and cells probed ``nprobe``, HNSW's ``hnsw_m`` links and
    ``ef_search``; for ivfpq / opq the ``pq_m`` sub-quantizers of ``pq_bits`` bits each (a vector's
    code is ``pq_m * pq_bits / 8`` bytes; 0: D / 8, at most 64), the ``train_size`` vectors sampled
    to train on (0: 64 per cell, at least 64 per PQ centroid) and ``rerank``: re-score the top
    ``rerank`` candidates exactly from the features on disk (0: off)."""

    metric: str = "cosine"
    kind: str = "flat"
    nlist: int = 0
    nprobe: int = 16
    hnsw_m: int = 32
    ef_search: int = 128
    ef_construction: int = 80
    pq_m: int = 0
    pq_bits: int = 8
    train_size: int = 0
    rerank: int = 0

    def resolved(self, count: int, dim: int = 0) -> IndexSpec:
        if self.metric not in METRICS:
            raise SearchIndexError(f"metric {self.metric!r}: expected one of {', '.join(METRICS)}")
        kind = self.kind
        if kind == "auto":
            kind = "flat" if count < AUTO_EXACT_LIMIT else "hnsw"
        if kind not in INDEX_TYPES:
            raise SearchIndexError(
                f"index type {self.kind!r}: expected auto or one of {', '.join(INDEX_TYPES)}"
            )
        nlist = self.nlist or max(1, min(count // MIN_POINTS_PER_CENTROID, int(4 * math.sqrt(count))))
        out = replace(self, kind=kind, nlist=nlist)
        if self.rerank < 0:
            raise SearchIndexError(f"--rerank {self.rerank}: expected 0 (off) or a number of candidates")
        if kind not in PQ_TYPES:
            return out
        if self.nprobe <= 0:
            raise SearchIndexError(f"--nprobe {self.nprobe}: expected a positive number of cells")
        if not 1 <= self.pq_bits <= 16:
            raise SearchIndexError(f"--pq-bits {self.pq_bits}: expected 1..16 (8 is usual)")
        pq_m = self.pq_m or (min(64, dim // 8) if dim % 8 == 0 else 0)
        if pq_m <= 0 or dim % pq_m:
            raise SearchIndexError(
                f"--pq-m {self.pq_m or pq_m}: must divide the feature size {dim} "
                f"(e.g. {', '.join(str(m) for m in _divisors(dim))})"
            )
        needed = MIN_POINTS_PER_CENTROID * max(nlist, 2**self.pq_bits)
        train = self.train_size or min(count, max(64 * nlist, 64 * 2**self.pq_bits))
        if train > count:
            raise SearchIndexError(
                f"--train-size {train:,} is larger than the gallery ({count:,} vectors): use at most {count:,}"
            )
        if train < needed:
            what = f"--nlist {nlist:,}" if nlist >= 2**self.pq_bits else f"--pq-bits {self.pq_bits}"
            raise SearchIndexError(
                f"{what} needs at least {needed:,} training vectors ({MIN_POINTS_PER_CENTROID} per centroid), "
                f"the sample has {train:,}: lower {what.split()[0]} or raise --train-size"
                + (f" (the gallery has {count:,})" if train == count else "")
            )
        return replace(out, pq_m=pq_m, train_size=train)


def _divisors(dim: int) -> list[int]:
    return [m for m in (8, 16, 32, 48, 64, 96, 128) if dim % m == 0 and m <= dim] or [1]


def _prepare(feats: np.ndarray, metric: str) -> np.ndarray:
    if metric != "cosine":
        return np.ascontiguousarray(feats, dtype=np.float32)
    x = np.array(feats, dtype=np.float32, order="C", copy=True)  # normalised in place: never the caller's
    _faiss().normalize_L2(x)
    return x


def _to_distance(scores: np.ndarray, metric: str) -> np.ndarray:
    """faiss's scores as the evaluation's distances (cosine: ``1 - inner product``)."""
    return (1.0 - scores if metric == "cosine" else scores).astype(np.float32)


def _flat(dim: int, metric: str):
    faiss = _faiss()
    return faiss.IndexFlatIP(dim) if metric == "cosine" else faiss.IndexFlatL2(dim)


def _rescore(
    q: np.ndarray, cand: np.ndarray, features: FeatureShards, metric: str, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """The candidates ``cand`` (global row ids, -1 = none) of prepared queries ``q`` re-scored exactly
    from ``features`` and sorted: ``(distances, ids)``, ``k`` per query, -1 / inf past the candidates."""
    valid = cand >= 0
    ids = np.unique(cand[valid])
    dist = np.full(cand.shape, np.inf, np.float32)
    if len(ids):
        rows = _prepare(features.take(ids), metric)  # the same preparation as the index and exact search
        pos = np.searchsorted(ids, np.where(valid, cand, ids[0]))
        for s in range(0, len(q), 128):
            block, qb = rows[pos[s : s + 128]], q[s : s + 128]
            if metric == "cosine":
                d = 1.0 - np.einsum("bkd,bd->bk", block, qb)
            else:
                diff = block - qb[:, None, :]
                d = np.einsum("bkd,bkd->bk", diff, diff)
            dist[s : s + 128] = np.where(valid[s : s + 128], d, np.inf)
    order = np.argsort(dist, axis=1, kind="stable")[:, :k]
    out_d = np.take_along_axis(dist, order, 1)
    out_i = np.take_along_axis(cand, order, 1).astype(np.int64)
    out_i[~np.isfinite(out_d)] = -1
    return out_d, out_i


def exact_search(
    features: np.ndarray | FeatureShards,
    queries: np.ndarray,
    k: int,
    metric: str = "cosine",
    chunk_rows: int = 262_144,
) -> tuple[np.ndarray, np.ndarray]:
    """Exact ``(distances, global row ids)``, k per query, over features in memory or on disk, read
    ``chunk_rows`` at a time (a gallery larger than memory is never held whole); the reference the
    approximate indexes' recall is measured against."""
    faiss = _faiss()
    if isinstance(features, np.ndarray):
        features = FeatureShards.from_arrays([features])
    if metric not in METRICS:
        raise SearchIndexError(f"metric {metric!r}: expected one of {', '.join(METRICS)}")
    q = _prepare(queries, metric)
    k = max(1, min(int(k), len(features)))
    heap = faiss.ResultHeap(len(q), k, keep_max=metric == "cosine")
    for start, rows in features.chunks(chunk_rows):
        flat = _flat(features.dim, metric)
        flat.add(_prepare(rows, metric))
        scores, idx = flat.search(q, min(k, len(rows)))
        heap.add_result(scores, np.where(idx >= 0, idx + start, -1))  # chunk rows -> gallery rows
    heap.finalize()
    return _to_distance(heap.D, metric), heap.I.astype(np.int64)


class GalleryIndex:
    """A faiss index over gallery features, with the gallery's file names.

    ``GalleryIndex.build(feats, files, IndexSpec(...))`` or, for ivfpq / opq from features on disk,
    ``GalleryIndex.build_streaming(folder_or_npy, IndexSpec(kind="ivfpq", ...))``;
    ``search(queries, k) -> (dist, idx)`` (idx: gallery rows, -1 where fewer than k were found);
    ``save(path)`` writes ``path`` (faiss) plus ``path.json`` (how it was built, and where the
    features are for ``rerank``) and ``path.files.txt``; ``GalleryIndex.open(path)`` reads them back.
    """

    def __init__(
        self, index, spec: IndexSpec, files: Sequence[str], features: Optional[FeatureShards] = None
    ) -> None:
        self.index = index
        self.spec = spec
        self.files = list(files)
        self.features = features

    @property
    def size(self) -> int:
        return int(self.index.ntotal)

    @property
    def exact(self) -> bool:
        return self.spec.kind == "flat"

    @property
    def bytes_per_vector(self) -> float:
        """Index memory per gallery vector: its code (D floats for flat, HNSW, IVF; the PQ code for
        ivfpq / opq), plus the 8-byte id of IVF lists, plus HNSW's links."""
        faiss = _faiss()
        if self.spec.kind == "flat":
            return float(self.index.code_size)
        if self.spec.kind == "hnsw":
            links = self.index.hnsw.neighbors.size() * 4 / max(1, self.size)
            return float(self.index.d * 4 + links)  # flat storage: D float32
        return float(faiss.extract_index_ivf(self.index).code_size + 8)

    @classmethod
    def build(
        cls, feats: np.ndarray, files: Sequence[str] = (), spec: Optional[IndexSpec] = None
    ) -> GalleryIndex:
        faiss = _faiss()
        if feats.ndim != 2 or len(feats) == 0:
            raise SearchIndexError(
                f"gallery features must be a non-empty N x D array, got shape {feats.shape}"
            )
        if files and len(files) != len(feats):
            raise SearchIndexError(f"{len(feats)} gallery features but {len(files)} file names")
        spec = (spec or IndexSpec()).resolved(len(feats), feats.shape[1])
        if spec.kind in PQ_TYPES:  # the streaming build over the one array: the same index
            return cls.build_streaming(FeatureShards.from_arrays([feats]), spec, files)
        x = _prepare(feats, spec.metric)
        dim = x.shape[1]
        metric = faiss.METRIC_INNER_PRODUCT if spec.metric == "cosine" else faiss.METRIC_L2
        if spec.kind == "flat":
            index = _flat(dim, spec.metric)
        elif spec.kind == "ivf":
            quantizer = _flat(dim, spec.metric)
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
        return cls(index, spec, files)

    @classmethod
    def build_streaming(
        cls,
        features: str | FeatureShards,
        spec: Optional[IndexSpec] = None,
        files: Optional[Sequence[str]] = None,
        chunk_rows: int = 65_536,
        seed: int = 0,
    ) -> GalleryIndex:
        """An ivfpq / opq index over features on disk (an extraction folder or ``.npy``, or a
        :class:`FeatureShards`): trained on ``spec.train_size`` sampled rows, then filled
        ``chunk_rows`` at a time with each row's global number as its id. Memory: the sample, one
        chunk and the codes, never the gallery."""
        faiss = _faiss()
        if isinstance(features, str):
            try:
                features = FeatureShards.open(features)
            except FeatureFileError as e:
                raise SearchIndexError(str(e)) from e
        spec = (spec or IndexSpec(kind="ivfpq")).resolved(len(features), features.dim)
        if spec.kind not in PQ_TYPES:
            raise SearchIndexError(
                f"a streaming build makes {' or '.join(PQ_TYPES)} indexes, not {spec.kind!r}: "
                "load the features and use GalleryIndex.build"
            )
        files = list(features.files if files is None else files)
        if files and len(files) != len(features):
            raise SearchIndexError(f"{len(features)} gallery features but {len(files)} file names")
        metric = faiss.METRIC_INNER_PRODUCT if spec.metric == "cosine" else faiss.METRIC_L2
        key = f"IVF{spec.nlist},PQ{spec.pq_m}x{spec.pq_bits}np"  # np: no polysemous training (slow, unused)
        if spec.kind == "opq":
            key = f"OPQ{spec.pq_m},{key}"
        index = faiss.index_factory(features.dim, key, metric)
        _, sample = features.sample(spec.train_size, seed)
        index.train(_prepare(sample, spec.metric))
        del sample
        for start, rows in features.chunks(chunk_rows):
            ids = np.arange(start, start + len(rows), dtype=np.int64)  # global row numbers across shards
            index.add_with_ids(_prepare(rows, spec.metric), ids)
        faiss.extract_index_ivf(index).nprobe = min(spec.nprobe, spec.nlist)
        logger.info(
            "%s index (%s) of %d vectors: %.0f bytes per vector",
            spec.kind,
            key,
            index.ntotal,
            cls._ivf_bytes(index),
        )
        return cls(index, spec, files, features)

    @staticmethod
    def _ivf_bytes(index) -> float:
        return float(_faiss().extract_index_ivf(index).code_size + 8)

    def search(
        self, queries: np.ndarray, k: int, rerank: Optional[int] = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(distances, indices)``, each num_queries x min(k, gallery size), nearest first; indices
        are gallery rows, -1 where the index found fewer than k. ``rerank`` (default: the spec's)
        fetches that many candidates and re-scores them exactly from the stored features."""
        if queries.ndim != 2 or queries.shape[1] != self.index.d:
            raise SearchIndexError(f"query features must be N x {self.index.d}, got shape {queries.shape}")
        k = max(1, min(int(k), self.size))
        rerank = self.spec.rerank if rerank is None else int(rerank)
        q = _prepare(queries, self.spec.metric)
        if rerank <= 0 or self.spec.kind not in PQ_TYPES:  # the other kinds score full vectors already
            scores, idx = self.index.search(q, k)
            return _to_distance(scores, self.spec.metric), idx.astype(np.int64)
        if self.features is None:
            raise SearchIndexError(
                "--rerank re-scores candidates from the gallery features, and this index has none "
                "(its features folder moved or it was built in memory): give --gallery, or set --rerank 0"
            )
        depth = min(max(k, rerank), self.size)
        out_d, out_i = [], []
        for s in range(0, len(q), 1024):  # bounds the gathered candidate rows
            _, cand = self.index.search(q[s : s + 1024], depth)
            d, i = _rescore(q[s : s + 1024], cand, self.features, self.spec.metric, k)
            out_d.append(d)
            out_i.append(i)
        return np.concatenate(out_d), np.concatenate(out_i)

    def save(self, path: str) -> list[str]:
        faiss = _faiss()
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        faiss.write_index(self.index, path)
        meta = {"spec": asdict(self.spec), "size": self.size, "dim": int(self.index.d)}
        if self.features is not None and self.features.source:
            meta["features"] = self.features.source  # where rerank reads the rows (memory-mapped)
        with open(path + ".json", "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=2)
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
        if spec.kind == "ivf" or spec.kind in PQ_TYPES:
            faiss.extract_index_ivf(index).nprobe = min(spec.nprobe, spec.nlist)
        elif spec.kind == "hnsw":
            index.hnsw.efSearch = spec.ef_search
        files_path = path + ".files.txt"
        files = []
        if os.path.isfile(files_path):
            with open(files_path, encoding="utf-8") as f:
                files = f.read().splitlines()
        features = None
        source = meta.get("features")
        if source and os.path.exists(source):
            try:
                features = FeatureShards.open(source)
            except FeatureFileError as e:
                logger.warning("%s: the gallery features cannot be read (%s): no rerank", path, e)
            else:
                if len(features) != index.ntotal:
                    logger.warning(
                        "%s: %s has %d rows, the index %d vectors: no rerank",
                        path,
                        source,
                        len(features),
                        index.ntotal,
                    )
                    features = None
        elif source:
            logger.warning("%s: its gallery features %s are gone: no rerank", path, source)
        return cls(index, spec, files, features)


def recall_against_exact(
    approx_idx: np.ndarray, exact_idx: np.ndarray, ks: Sequence[int]
) -> dict[int, float]:
    """For each k: the share of the exact top-k neighbours that the approximate top-k found
    (1.0 = the same neighbours)."""
    out = {}
    for k in ks:
        k = min(k, exact_idx.shape[1], approx_idx.shape[1])
        hits = sum(
            len(np.intersect1d(a[:k][a[:k] >= 0], e[:k][e[:k] >= 0])) for a, e in zip(approx_idx, exact_idx)
        )
        out[k] = hits / float(k * len(exact_idx))
    return out


_MARKET_NAME = re.compile(r"^([-\d]+)_c(\d+)")


def market_ids(path: str) -> Optional[tuple[int, int]]:
    """``(person id, camera id)`` of a Market-1501-style file name (``0002_c1s1_000451_03.jpg``),
    None for another name."""
    match = _MARKET_NAME.match(os.path.basename(path))
    return None if match is None else (int(match.group(1)), int(match.group(2)))


def market_labels(paths: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Person and camera ids from Market-1501-style file names (``0002_c1s1_000451_03.jpg``)."""
    pids, camids = [], []
    for path in paths:
        ids = market_ids(path)
        if ids is None:
            raise SearchIndexError(
                f"{path!r} is not named like Market-1501 (PPPP_cC...): no person id to evaluate"
            )
        pids.append(ids[0])
        camids.append(ids[1])
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
