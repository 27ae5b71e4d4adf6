"""Inference benchmark: feature extraction from JPEG folders, and gallery search with faiss.

Extraction (``--part extract``): images/s of ``FeatureExtractor.iter_path_features`` (JPEG files ->
decode -> test transforms -> model, through ``DataLoaderX`` with the config's loader settings)
against the same model's forward pass alone on already decoded and resized tensors, measured
side by side (alternating, best of ``--repeats``). The ratio shows how much of the decoding the
loader hides behind the model.

Search (``--part search``): for each gallery size, exact (``IndexFlatIP``), IVF and HNSW indexes on
512-d clustered vectors (identities = cluster centres + noise, like re-ID features): build time,
latency per query (a batch of ``--queries`` queries), index size, peak memory of the process, and
recall@1 / recall@10 against the exact search. Each (size, index) pair runs in a fresh child process
so its peak resident memory is its own.

    python benchmarks/inference.py                         # both parts, galleries of 100k and 1M
    python benchmarks/inference.py --part search --sizes 100000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def load_average() -> str:
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "n/a"


# ------------------------------------------------------------------------------------- extraction
def bench_extract(config_file: str, num_images: int, repeats: int, opts: list[str]) -> dict:
    import torch

    from fastreid.data.synthetic.persons import SyntheticSpec, generate_market1501
    from fastreid.inference import FeatureExtractor, list_image_files

    root = tempfile.mkdtemp(prefix="fastreid-bench-")
    spec = SyntheticSpec(
        num_train_ids=2,
        num_test_ids=max(8, num_images // 6),
        min_images=8,
        max_images=14,
        num_distractors=0,
        num_junk=0,
    )
    folder = generate_market1501(root, spec)
    files = list_image_files(os.path.join(folder, "bounding_box_test"))[:num_images]
    extractor = FeatureExtractor(config_file=config_file, device="cpu", opts=opts)
    batch = extractor.batch_size
    decoded = [extractor.preprocess(files[i : i + batch]) for i in range(0, len(files), batch)]

    def forward_only() -> float:
        start = time.perf_counter()
        for images in decoded:
            extractor.features_of_batch(images)
        return len(files) / (time.perf_counter() - start)

    def extraction() -> float:
        start = time.perf_counter()
        count = sum(len(paths) for paths, _ in extractor.iter_path_features(files))
        return count / (time.perf_counter() - start)

    for _ in extractor.iter_path_features(files[:batch]):  # warm-up: allocator, first-call costs
        pass
    fwd, ext = [], []
    for _ in range(repeats):
        fwd.append(forward_only())
        ext.append(extraction())
    return {
        "config": os.path.relpath(config_file, ROOT),
        "images": len(files),
        "batch": batch,
        "size": list(extractor.cfg.INPUT.SIZE_TEST),
        "forward_ips": max(fwd),
        "extract_ips": max(ext),
        "ratio": max(ext) / max(fwd),
        "torch_threads": torch.get_num_threads(),
        "loader": loader_settings(extractor),
    }


def loader_settings(extractor) -> str:
    """What the loader policy decided for the extraction loader, in a few words."""
    decision = extractor.last_loader_decision
    if decision is None:
        return "unknown"
    return (
        f"{decision.num_workers} worker processes ({decision.mp_context or '-'}), "
        f"{decision.num_threads} threads, prefetch {decision.prefetch_factor}"
    )


# ------------------------------------------------------------------------------------- search
def clustered(n: int, dim: int, seed: int, centres: np.ndarray) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.empty((n, dim), np.float32)
    for s in range(0, n, 65536):
        m = min(65536, n - s)
        out[s : s + m] = centres[rng.integers(0, len(centres), m)] + 0.35 * rng.standard_normal(
            (m, dim), np.float32
        )
    return out


def search_stage(size: int, kind: str, dim: int, num_queries: int, workdir: str) -> dict:
    """One (gallery size, index type) measurement in this process."""
    from fastreid.inference.search import GalleryIndex, IndexSpec, recall_against_exact

    centres = np.random.default_rng(0).standard_normal((max(1000, size // 20), dim), np.float32)
    gallery = clustered(size, dim, 1, centres)
    queries = clustered(num_queries, dim, 2, centres)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    spec = IndexSpec(metric="cosine", kind=kind, nlist=int(np.sqrt(size)), nprobe=16, ef_search=128)
    start = time.perf_counter()
    index = GalleryIndex.build(gallery, spec=spec)
    build_s = time.perf_counter() - start
    del gallery
    start = time.perf_counter()
    _, idx = index.search(queries, 10)
    search_s = time.perf_counter() - start
    import faiss

    index_bytes = len(faiss.serialize_index(index.index))
    exact_path = os.path.join(workdir, f"exact_{size}.npy")
    if kind == "flat":
        np.save(exact_path, idx)
        recall = {1: 1.0, 10: 1.0}
    else:
        recall = recall_against_exact(idx, np.load(exact_path), (1, 10))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "size": size,
        "kind": kind,
        "build_s": build_s,
        "ms_per_query": search_s / num_queries * 1000,
        "index_gb": index_bytes / 1e9,
        "peak_rss_gb": peak / 1e6,
        "rss_over_data_gb": (peak - base) / 1e6,
        "recall1": recall[1],
        "recall10": recall[10],
    }


def bench_search(sizes: list[int], kinds: list[str], dim: int, num_queries: int) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="fastreid-search-bench-") as workdir:
        for size in sizes:
            for kind in ["flat"] + [k for k in kinds if k != "flat"]:
                cmd = [
                    sys.executable,
                    os.path.abspath(__file__),
                    "--stage",
                    f"{size}:{kind}",
                    "--dim",
                    str(dim),
                    "--queries",
                    str(num_queries),
                    "--workdir",
                    workdir,
                ]
                out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
                row = json.loads(out.strip().splitlines()[-1])
                rows.append(row)
                print(
                    f"  {size:>9,} {kind:5s} build {row['build_s']:7.1f} s  {row['ms_per_query']:8.3f} ms/query  "
                    f"index {row['index_gb']:.2f} GB  peak RSS {row['peak_rss_gb']:.2f} GB  "
                    f"recall@1 {row['recall1']:.3f}  recall@10 {row['recall10']:.3f}",
                    flush=True,
                )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", default="all", choices=["all", "extract", "search"])
    parser.add_argument(
        "--config-file", default=os.path.join(ROOT, "configs", "Market1501", "bagtricks_R50.yml")
    )
    parser.add_argument("--images", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--kinds", nargs="+", default=["flat", "ivf", "hnsw"])
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--stage", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--workdir", default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--opts",
        nargs=argparse.REMAINDER,
        default=[],
        help="config overrides (KEY VALUE ...) for the extraction part; last",
    )
    args = parser.parse_args()
    if args.stage:
        size, kind = args.stage.split(":")
        print(json.dumps(search_stage(int(size), kind, args.dim, args.queries, args.workdir)))
        return

    print(f"load average before: {load_average()}  (2-core machine)", flush=True)
    if args.part in ("all", "extract"):
        r = bench_extract(
            args.config_file, args.images, args.repeats, ["MODEL.BACKBONE.PRETRAIN", False, *args.opts]
        )
        print(
            f"extraction, {r['config']} at {r['size'][0]}x{r['size'][1]}, batch {r['batch']}, {r['images']} JPEGs, "
            f"loader: {r['loader']}, torch threads {r['torch_threads']}"
        )
        print(f"  forward only (decoded tensors): {r['forward_ips']:8.1f} images/s")
        print(
            f"  extraction from JPEG files    : {r['extract_ips']:8.1f} images/s  "
            f"= {r['ratio']:.2f}x forward-only (target >= 0.9x)",
            flush=True,
        )
    if args.part in ("all", "search"):
        print(f"search, {args.dim}-d cosine, {args.queries} queries, top-10:", flush=True)
        bench_search(args.sizes, args.kinds, args.dim, args.queries)
    print(f"load average after: {load_average()}", flush=True)


if __name__ == "__main__":
    main()
