"""``tools/search.py`` (``fastreid-search``): the nearest gallery images of each query.

    # gallery features once, then search with query features (or query images + the model)
    python tools/search.py --query logs/demo/query_feats --gallery logs/demo/gallery_feats \
        --output logs/demo/search --evaluate

Queries: an extraction folder / ``.npy`` / ``.pt`` of features, or images (folders, globs, lists)
with ``--config-file`` (+ ``MODEL.WEIGHTS``) to extract them. Gallery: features, or a saved index
(``--index``). ``--index-type`` flat (exact), ivf, hnsw, ivfpq / opq (compressed: built from the
features on disk shard by shard, ``--rerank N`` re-scores the top N exactly from them) or auto
(exact below 200k vectors); prints the index's bytes per vector, and an approximate search also
runs the exact one on ``--check-recall N`` sampled queries and prints recall@1/@k.
Writes ``topk.csv``, ``topk.json`` and rank-list pictures; ``--evaluate`` prints Rank-1/5/10 from
Market-1501 file names with the evaluation's protocol.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import os
import sys
import time
from collections.abc import Sequence

import numpy as np

from fastreid.cli.entry import tool_entry_point
from fastreid.config.locate import resolve_config_file

__all__ = ["get_parser", "main", "run"]

logger = logging.getLogger("fastreid.search")


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Search query images or features in a gallery (faiss)")
    parser.add_argument(
        "--query",
        required=True,
        nargs="+",
        help="query features (extraction folder, .npy, .pt) or images (folders, globs, .txt lists)",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--gallery", help="gallery features: an extraction folder, .npy or .pt")
    source.add_argument("--index", help="a saved index (from --save-index) instead of --gallery")
    parser.add_argument(
        "--output", default="search_output", help="folder for topk.csv, topk.json, rank_lists/"
    )
    parser.add_argument("-k", "--topk", type=int, default=10, help="neighbours per query")
    parser.add_argument(
        "--metric",
        default=None,
        choices=["cosine", "euclidean"],
        help="default: TEST.METRIC of --config-file, else cosine",
    )
    parser.add_argument(
        "--index-type",
        default="auto",
        choices=["auto", "flat", "ivf", "hnsw", "ivfpq", "opq"],
        help="flat = exact; ivfpq / opq = compressed (product quantisation, opq after a learned rotation), "
        "built from the gallery's files shard by shard; auto = exact below 200k gallery vectors, else hnsw",
    )
    parser.add_argument("--nlist", type=int, default=0, help="IVF cells (0: about 4 sqrt(N))")
    parser.add_argument("--nprobe", type=int, default=16, help="IVF cells visited per query")
    parser.add_argument("--hnsw-m", type=int, default=32, help="HNSW links per vector")
    parser.add_argument("--ef-search", type=int, default=128, help="HNSW search depth")
    parser.add_argument(
        "--pq-m", type=int, default=0, help="ivfpq/opq: sub-quantizers, must divide D (0: D/8, at most 64)"
    )
    parser.add_argument("--pq-bits", type=int, default=8, help="ivfpq/opq: bits per sub-quantizer")
    parser.add_argument(
        "--train-size",
        type=int,
        default=0,
        help="ivfpq/opq: gallery vectors sampled to train on (0: 64 per IVF cell)",
    )
    parser.add_argument(
        "--rerank",
        type=int,
        default=None,
        help="ivfpq/opq: re-score the top N candidates exactly from the gallery features on disk "
        "(memory-mapped); default 0, or what a saved --index was built with",
    )
    parser.add_argument(
        "--check-recall",
        "--recall-queries",
        dest="recall_queries",
        type=int,
        default=1000,
        help="queries (sampled) checked against exact search to report an approximate index's recall@1/@k; 0: skip",
    )
    parser.add_argument(
        "--save-index", default=None, help="write the built index here (re-open with --index)"
    )
    parser.add_argument("--pictures", type=int, default=10, help="rank-list pictures of the first N queries")
    parser.add_argument(
        "--evaluate",
        action="store_true",
        help="Rank-1/5/10 from Market-1501 file names (PPPP_cC...), as the evaluation computes",
    )
    parser.add_argument(
        "--config-file",
        default=None,
        type=resolve_config_file,
        help="the model's config, to extract query images",
    )
    parser.add_argument("--device", default="auto", help="device for extracting query images")
    parser.add_argument(
        "opts", default=[], nargs=argparse.REMAINDER, help="config overrides: KEY VALUE pairs"
    )
    return parser


def _is_feature_source(spec: str) -> bool:
    if spec.endswith((".npy", ".pt")):
        return True
    return os.path.isdir(spec) and any(
        os.path.exists(os.path.join(spec, name)) for name in ("features.npy", "features.pt", "meta.json")
    )


def load_queries(args: argparse.Namespace) -> tuple[np.ndarray, list[str]]:
    # the config package and the shards module load torch: only once the arguments are good
    from fastreid.config import ConfigError
    from fastreid.inference.shards import load_features  # torch: as above

    if len(args.query) == 1 and _is_feature_source(args.query[0]):
        return load_features(args.query[0])
    from fastreid.inference.extractor import FeatureExtractor  # the model: only when images are given
    from fastreid.inference.inputs import list_image_files  # as above

    files = [os.path.abspath(p) for p in list_image_files(args.query)]  # names a missing path first
    if not args.config_file:
        raise ConfigError(
            "--query names images: add --config-file (and MODEL.WEIGHTS) to extract their features"
        )
    extractor = FeatureExtractor(config_file=args.config_file, device=args.device, opts=args.opts)
    return extractor(files).numpy(), files


def _metric(args: argparse.Namespace) -> str:
    if args.metric:
        return args.metric
    if args.config_file:
        from fastreid.config import get_cfg  # the config package loads torch: only with a config file

        cfg = get_cfg()
        cfg.merge_from_file(args.config_file)
        if cfg.TEST.METRIC in ("cosine", "euclidean"):
            return cfg.TEST.METRIC
    return "cosine"


def write_tables(
    folder: str,
    q_files: Sequence[str],
    g_files: Sequence[str],
    dist: np.ndarray,
    idx: np.ndarray,
    matches: np.ndarray | None,
) -> list[str]:
    """``topk.csv`` (query, rank, gallery, distance[, match]) and ``topk.json``."""
    os.makedirs(folder, exist_ok=True)

    def name(files: Sequence[str], i: int) -> str:
        return files[i] if 0 <= i < len(files) else str(i)

    csv_path, json_path = os.path.join(folder, "topk.csv"), os.path.join(folder, "topk.json")
    with open(csv_path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["query", "rank", "gallery", "distance"] + (["match"] if matches is not None else []))
        for q in range(len(idx)):
            for r, (g, d) in enumerate(zip(idx[q], dist[q])):
                row = [name(q_files, q), r + 1, name(g_files, int(g)), f"{float(d):.6f}"]
                writer.writerow(row + ([int(matches[q, r])] if matches is not None else []))
    records = [
        {
            "query": name(q_files, q),
            "results": [
                {"gallery": name(g_files, int(g)), "distance": round(float(d), 6)}
                for g, d in zip(idx[q], dist[q])
            ],
        }
        for q in range(len(idx))
    ]
    with open(json_path, "w", encoding="utf-8") as f:
        json.dump(records, f, indent=1)
    return [csv_path, json_path]


def draw_rank_lists(
    folder: str,
    q_files: Sequence[str],
    g_files: Sequence[str],
    dist: np.ndarray,
    idx: np.ndarray,
    matches: np.ndarray | None,
    count: int,
) -> list[str]:
    """One strip per query (the first ``count``), via ``fastreid.evaluation.visualize``: green /
    red borders for true / false matches when the labels are known, grey otherwise."""
    from fastreid.evaluation.visualize import rank_list_image  # the evaluation (torch): only for the pictures

    if not q_files or not g_files:
        logger.info("No image file names for the queries or the gallery: no rank-list pictures")
        return []
    os.makedirs(folder, exist_ok=True)
    written = []
    for q in range(min(count, len(idx))):
        ranked = [int(g) for g in idx[q] if g >= 0]
        marks: list[bool | None] = (
            [bool(m) for m in matches[q, : len(ranked)]] if matches is not None else [None] * len(ranked)
        )
        captions = [f"{r + 1}:{float(d):.2f}" for r, d in enumerate(dist[q][: len(ranked)])]
        strip = rank_list_image(q_files[q], [g_files[g] for g in ranked], marks, captions=captions)
        path = os.path.join(folder, f"{q:05d}_{os.path.splitext(os.path.basename(q_files[q]))[0]}.png")
        strip.save(path)
        written.append(path)
    return written


def _streamable(gallery: str) -> bool:
    """Features that a compressed index can read from disk shard by shard (not a ``.pt``)."""
    if gallery.endswith(".npy"):
        return True
    return os.path.isdir(gallery) and (
        os.path.exists(os.path.join(gallery, "features.npy"))
        or os.path.isdir(os.path.join(gallery, "shards"))
    )


def main(args: argparse.Namespace) -> dict:
    # faiss and torch (via the shards module): only once the arguments are good
    from fastreid.inference.search import (
        PQ_TYPES,
        GalleryIndex,
        IndexSpec,
        SearchIndexError,
        evaluation_depth,
        exact_search,
        market_labels,
        rank_accuracy,
        recall_against_exact,
    )
    from fastreid.inference.shards import load_features  # as above

    q_feats, q_files = load_queries(args)
    if args.index:
        index = GalleryIndex.open(args.index)
        g_feats = None
        logger.info(
            "Opened %s: %s %s index of %d vectors", args.index, index.spec.kind, index.spec.metric, index.size
        )
    else:
        spec = IndexSpec(
            metric=_metric(args),
            kind=args.index_type,
            nlist=args.nlist,
            nprobe=args.nprobe,
            hnsw_m=args.hnsw_m,
            ef_search=args.ef_search,
            pq_m=args.pq_m,
            pq_bits=args.pq_bits,
            train_size=args.train_size,
            rerank=args.rerank or 0,
        )
        start = time.perf_counter()
        if args.index_type in PQ_TYPES and _streamable(args.gallery):
            g_feats = (
                None  # stays on disk: trained on a sample, added shard by shard, re-scored by memory map
            )
            index = GalleryIndex.build_streaming(args.gallery, spec)
        else:
            g_feats, g_files = load_features(args.gallery)
            index = GalleryIndex.build(g_feats, g_files, spec)
        logger.info(
            "Built a %s %s index of %d vectors in %.2f s",
            index.spec.kind,
            index.spec.metric,
            index.size,
            time.perf_counter() - start,
        )
        if args.save_index:
            for path in index.save(args.save_index):
                logger.info("wrote %s", path)
    g_files = index.files
    if q_feats.shape[1] != index.index.d:
        raise SearchIndexError(
            f"query features have {q_feats.shape[1]} values, the gallery's {index.index.d}: "
            "were they made by the same model?"
        )

    summary: dict = {
        "queries": len(q_feats),
        "gallery": index.size,
        "index": index.spec.kind,
        "metric": index.spec.metric,
    }
    depth = args.topk
    labels = None
    if args.evaluate:
        q_pids, q_camids = market_labels(q_files)
        g_pids, g_camids = market_labels(g_files)
        labels = (q_pids, q_camids, g_pids, g_camids)
        depth = max(depth, evaluation_depth(q_pids, q_camids, g_pids, g_camids, max_rank=10))
    if args.rerank and index.spec.kind not in PQ_TYPES:
        logger.warning(
            "--rerank re-scores compressed (ivfpq / opq) candidates; a %s index needs none", index.spec.kind
        )
    summary["bytes_per_vector"] = index.bytes_per_vector
    print(
        f"index: {index.spec.kind} ({index.spec.metric}), {index.size} vectors, "
        f"{index.bytes_per_vector:.1f} bytes per vector ({_bytes_detail(index)})",
        flush=True,
    )
    start = time.perf_counter()
    dist, idx = index.search(q_feats, depth, rerank=args.rerank)
    elapsed = time.perf_counter() - start
    summary["search_ms_per_query"] = elapsed / max(1, len(q_feats)) * 1000
    print(
        f"searched {len(q_feats)} queries in {index.size} gallery vectors ({index.spec.kind}, {index.spec.metric}): "
        f"{summary['search_ms_per_query']:.3f} ms/query",
        flush=True,
    )

    if not index.exact and args.recall_queries > 0:
        reference = g_feats if g_feats is not None else index.features  # in memory, or read from disk
        if reference is None:
            logger.warning(
                "The index was opened, and its gallery features are not on disk: no recall to measure"
            )
        else:
            sample = np.arange(len(q_feats))
            if len(sample) > args.recall_queries:
                sample = np.sort(
                    np.random.default_rng(0).choice(len(q_feats), args.recall_queries, replace=False)
                )
            _, exact_idx = exact_search(reference, q_feats[sample], args.topk, index.spec.metric)
            recall = recall_against_exact(idx[sample, : args.topk], exact_idx, (1, args.topk))
            summary["recall"] = {f"recall@{k}": v for k, v in recall.items()}
            figures = "  ".join(f"recall@{k} {v:.4f}" for k, v in recall.items())
            print(f"recall against exact search ({len(sample)} queries): {figures}", flush=True)

    matches = None
    if labels is not None:
        q_pids, q_camids, g_pids, g_camids = labels
        summary.update(rank_accuracy(idx, q_pids, q_camids, g_pids, g_camids))
        print("  ".join(f"{key} {summary[key]:.2f}%" for key in ("Rank-1", "Rank-5", "Rank-10")), flush=True)
        top = idx[:, : args.topk]
        matches = (g_pids[top] == q_pids[:, None]) & (top >= 0)
    dist, idx = dist[:, : args.topk], idx[:, : args.topk]
    written = write_tables(args.output, q_files, g_files, dist, idx, matches)
    if args.pictures > 0:
        pictures = draw_rank_lists(
            os.path.join(args.output, "rank_lists"), q_files, g_files, dist, idx, matches, args.pictures
        )
        if pictures:
            written.append(os.path.dirname(pictures[0]) + os.sep)
    with open(os.path.join(args.output, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2)
    print("wrote " + ", ".join(written), flush=True)
    return summary


def _bytes_detail(index) -> str:
    kind = index.spec.kind
    if kind in ("ivfpq", "opq"):
        code = int(index.bytes_per_vector) - 8
        return f"{code}-byte code ({index.spec.pq_m} x {index.spec.pq_bits} bits) + 8-byte id"
    if kind == "ivf":
        return f"{index.index.d} floats + 8-byte id"
    if kind == "hnsw":
        return f"{index.index.d} floats + graph links"
    return f"{index.index.d} floats"


run = tool_entry_point(get_parser, main, "query")


if __name__ == "__main__":
    sys.exit(run())
