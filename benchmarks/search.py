"""Gallery search at scale: compressed indexes (IVF-PQ, OPQ + IVF-PQ) over synthetic features on disk.

Writes ``--count`` clustered ``--dim``-d float32 vectors as extraction shards (``shards/00000.npy``
..., the layout fastreid-extract writes) to a temporary folder, then, each in a fresh child process
so that its peak RSS is its own:

- ``exact``: the true top-10 of ``--queries`` queries, read shard by shard (the recall reference);
- ``flat``: an exact in-memory index, only where the gallery fits twice in the available memory;
- ``ivfpq`` / ``opq``: ``GalleryIndex.build_streaming`` (train on a sample, add shard by shard),
  searched without and with ``--rerank`` (the top N re-scored from the memory-mapped shards).

Prints build time, bytes per vector, index size on disk, peak RSS (``getrusage``), queries per second
and recall@1 / recall@10 against the exact top-10; the folder is deleted at the end.

    python benchmarks/search.py                      # 1M vectors (about 2 GB of shards)
    python benchmarks/search.py --count 10000000     # 10M vectors (about 20 GB of shards)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from fastreid.utils.threads import configure_openmp  # noqa: E402  (after the checkout is on sys.path)

configure_openmp()  # passive OpenMP waits before faiss loads its runtime: 2 shared cores

from fastreid.inference.search import GalleryIndex, IndexSpec, exact_search, recall_against_exact  # noqa: E402
from fastreid.inference.shards import FeatureShards  # noqa: E402

GIB = 2**30


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB  # ru_maxrss: KiB on Linux


def available_bytes() -> int:
    with open("/proc/meminfo", encoding="ascii") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def write_gallery(folder: str, count: int, dim: int, shard_size: int, num_queries: int) -> None:
    """Clustered rows (about 20 per centre, noise 0.35 per value), written shard by shard."""
    centres = np.random.default_rng(0).standard_normal((max(1000, count // 20), dim), np.float32)
    os.makedirs(os.path.join(folder, "shards"), exist_ok=True)
    for k, start in enumerate(range(0, count, shard_size)):
        rng = np.random.default_rng(1000 + k)
        m = min(shard_size, count - start)
        rows = centres[rng.integers(0, len(centres), m)]
        rows += 0.35 * rng.standard_normal((m, dim), np.float32)
        np.save(os.path.join(folder, "shards", f"{k:05d}.npy"), rows)
    with open(os.path.join(folder, "meta.json"), "w", encoding="utf-8") as f:
        json.dump({"num_files": count, "shard_size": shard_size, "feature_dim": dim, "synthetic": True}, f)
    rng = np.random.default_rng(2)
    queries = centres[rng.integers(0, len(centres), num_queries)]
    queries += 0.35 * rng.standard_normal((num_queries, dim), np.float32)
    np.save(os.path.join(os.path.dirname(folder), "queries.npy"), queries)


def timed_search(index: GalleryIndex, queries: np.ndarray, rerank: int) -> tuple[np.ndarray, float]:
    index.search(queries[:10], 10, rerank=rerank)  # warm: the first touch of the memory maps
    start = time.perf_counter()
    _, idx = index.search(queries, 10, rerank=rerank)
    return idx, len(queries) / (time.perf_counter() - start)


def stage(kind: str, args: argparse.Namespace) -> list[dict]:
    """One measurement in this (child) process."""
    gallery = os.path.join(args.workdir, "gallery")
    queries = np.load(os.path.join(args.workdir, "queries.npy"))
    exact_path = os.path.join(args.workdir, "exact.npy")
    if kind == "exact":
        start = time.perf_counter()
        _, idx = exact_search(FeatureShards.open(gallery), queries, 10, "cosine")
        np.save(exact_path, idx)
        return [{"kind": "exact scan (reference)", "qps": len(queries) / (time.perf_counter() - start)}]
    exact = np.load(exact_path)
    start = time.perf_counter()
    if kind == "flat":
        feats = np.concatenate([rows for _, rows in FeatureShards.open(gallery).chunks(1 << 20)])
        index = GalleryIndex.build(feats, spec=IndexSpec(metric="cosine", kind="flat"))
        del feats
    else:
        spec = IndexSpec(
            metric="cosine",
            kind=kind,
            nlist=args.nlist or int(math.sqrt(args.count)),
            nprobe=args.nprobe,
            pq_m=args.pq_m,
            train_size=args.train_size,
        )
        index = GalleryIndex.build_streaming(gallery, spec)
    build_s = time.perf_counter() - start
    path = os.path.join(args.workdir, f"{kind}.faiss")
    index.save(path)
    size_gib = os.path.getsize(path) / GIB
    os.remove(path)
    rows = []
    for rerank in [0] + ([r for r in args.rerank if r > 0] if kind != "flat" else []):
        idx, qps = timed_search(index, queries, rerank)
        recall = recall_against_exact(idx, exact, (1, 10))
        rows.append(
            {
                "kind": kind + (f" + rerank {rerank}" if rerank else ""),
                "spec": f"nlist {index.spec.nlist}, nprobe {index.spec.nprobe}, PQ{index.spec.pq_m}x{index.spec.pq_bits}, "
                f"train {index.spec.train_size:,}"
                if kind != "flat"
                else "exact",
                "build_s": build_s,
                "bytes_per_vector": index.bytes_per_vector,
                "index_gib": size_gib,
                "qps": qps,
                "recall1": recall[1],
                "recall10": recall[10],
                "peak_rss_gib": peak_rss_gib(),
            }
        )
    return rows


def run_stage(kind: str, args: argparse.Namespace) -> list[dict]:
    cmd = [sys.executable, os.path.abspath(__file__), "--stage", kind, "--workdir", args.workdir]
    for name in ("count", "dim", "nlist", "nprobe", "pq_m", "train_size"):
        cmd += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    cmd += ["--rerank", *map(str, args.rerank)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode:
        sys.stderr.write(out.stderr)
        raise SystemExit(f"stage {kind} failed")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1_000_000, help="gallery vectors")
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--shard-size", type=int, default=100_000)
    parser.add_argument("--kinds", nargs="+", default=["flat", "ivfpq", "opq"])
    parser.add_argument("--nlist", type=int, default=0, help="IVF cells (0: sqrt(count))")
    parser.add_argument("--nprobe", type=int, default=16)
    parser.add_argument("--pq-m", type=int, default=64, help="bytes of PQ code per vector (8-bit codes)")
    parser.add_argument("--train-size", type=int, default=0, help="0: 64 per IVF cell")
    parser.add_argument(
        "--rerank",
        type=int,
        nargs="+",
        default=[100],
        help="candidates re-scored from the shards (each measured)",
    )
    parser.add_argument("--workdir", default=None, help="where the shards go (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the shards (with --workdir)")
    parser.add_argument("--stage", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stage:
        print(json.dumps(stage(args.stage, args)))
        return

    need = args.count * args.dim * 4
    free = shutil.disk_usage(args.workdir or tempfile.gettempdir()).free
    if need * 1.1 > free:
        raise SystemExit(f"{need / 1e9:.1f} GB of shards do not fit in {free / 1e9:.1f} GB of free disk")
    own = args.workdir is None
    args.workdir = args.workdir or tempfile.mkdtemp(prefix="fastreid-search-bench-")
    try:
        print(
            f"{args.count:,} synthetic {args.dim}-d vectors ({need / GIB:.1f} GiB of float32 shards, "
            f"{args.shard_size:,} rows each), {args.queries} queries, cosine, top-10, "
            f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores",
            flush=True,
        )
        start = time.perf_counter()
        if not os.path.exists(os.path.join(args.workdir, "gallery", "meta.json")):
            write_gallery(
                os.path.join(args.workdir, "gallery"), args.count, args.dim, args.shard_size, args.queries
            )
        print(f"  shards written in {time.perf_counter() - start:.0f} s", flush=True)
        ref = run_stage("exact", args)[0]
        print(f"  exact top-10 read from the shards (reference): {ref['qps']:.1f} queries/s", flush=True)
        print(
            f"  {'index':22s} {'build s':>8s} {'B/vector':>9s} {'index GiB':>10s} {'peak RSS GiB':>13s} "
            f"{'QPS':>9s} {'recall@1':>9s} {'recall@10':>10s}  settings",
            flush=True,
        )
        for kind in args.kinds:
            if kind == "flat" and need * 2 > available_bytes() * 0.8:
                print(
                    f"  {'flat':22s} skipped: {2 * need / GIB:.1f} GiB (features + index) do not fit in memory"
                )
                continue
            for row in run_stage(kind, args):
                print(
                    f"  {row['kind']:22s} {row['build_s']:8.1f} {row['bytes_per_vector']:9.1f} {row['index_gib']:10.3f} "
                    f"{row['peak_rss_gib']:13.2f} {row['qps']:9.1f} {row['recall1']:9.3f} {row['recall10']:10.3f}  "
                    f"{row['spec']}",
                    flush=True,
                )
    finally:
        if own and not args.keep:
            shutil.rmtree(args.workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
