"""Evaluation benchmark on Market-1501-sized synthetic features.

Each stage runs in a fresh child process (``--stage NAME``) so its peak resident memory can be read on
its own; the parent prints the stages side by side with ratios:

- ``matmul``:   the query x gallery distance matmul alone (the floor any evaluation pays);
- ``evaluate``: our full evaluation, features -> distances -> CMC, mAP, mINP (chunked, never the
  whole matrix);
- ``evaluate_dense``: the same from a dense distance matrix (``build_dist`` + ``evaluate_rank``);
- ``rerank``:   our k-reciprocal re-ranking from features (kNN + sparse structures) and its metrics;
- ``loop``:     a straightforward per-query numpy loop (upstream's python evaluator) for reference.

Usage:  python benchmarks/evaluation.py            (Market-sized, all stages)
        python benchmarks/evaluation.py --msmt     (adds the MSMT17-sized re-ranking: 93,820 x 512-d)
        python benchmarks/evaluation.py --scale [--upstream DIR] [--quick]
            evaluation (and re-ranking) CPU time and peak RSS at galleries of 4k, 16k, 64k and MSMT17
            size (queries in MSMT17's proportion, 2,048-d), the fitted exponent of CPU time against the
            number of query x gallery pairs, and with ``--upstream DIR`` (a checkout of upstream FastReID
            whose ``fastreid/evaluation/rank_cylib`` was built with its Makefile) upstream's
            ``build_dist`` + Cython ``evaluate_cy`` side by side on the same features
        python benchmarks/evaluation.py --rss      peak RSS at 2,500 vs 20,000 queries (g = 100,000, 128-d)
        python benchmarks/evaluation.py --knn      re-ranking's neighbour pass vs faiss IndexFlatL2
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def synthetic_reid(
    num_query: int,
    num_gallery: int,
    dim: int,
    num_ids: int,
    num_cams: int,
    num_distractors: int,
    noise: float = 2.4,
    seed: int = 0,
):
    """Features with a re-ID structure: identity centre + camera bias + noise.

    Every test identity has about ``num_query / num_ids`` queries (distinct cameras where possible) and
    the rest of its images in the gallery; ``num_distractors`` gallery images have pid 0 (Market's
    distractor id) and random features.
    """
    rng = np.random.default_rng(seed)
    ids = np.arange(1, num_ids + 1)
    q_pids = np.concatenate([ids, rng.choice(ids, num_query - num_ids)])
    g_pids = np.concatenate(
        [ids, rng.choice(ids, num_gallery - num_ids - num_distractors), np.zeros(num_distractors, np.int64)]
    )
    q_cams = rng.integers(0, num_cams, num_query)
    g_cams = rng.integers(0, num_cams, num_gallery)
    centres = rng.standard_normal((num_ids + 1, dim), dtype=np.float32)
    cam_bias = rng.standard_normal((num_cams, dim), dtype=np.float32)
    # noise scale tuned so that Market-sized metrics look like a trained ResNet-50's
    # (Rank-1 ~ 95 %, mAP ~ 80 %, mINP ~ 50 %); some identities are harder than others
    spread = rng.uniform(0.7, 1.3, num_ids + 1).astype(np.float32) * noise

    def make(pids, cams):
        out = np.empty((len(pids), dim), np.float32)
        for s in range(0, len(pids), 2048):  # in pieces: no feature-sized temporaries
            p, c = pids[s : s + 2048], cams[s : s + 2048]
            f = centres[p] + 0.6 * cam_bias[c]
            f += rng.standard_normal((len(p), dim), dtype=np.float32) * spread[p, None]
            f[p == 0] = rng.standard_normal((int((p == 0).sum()), dim), dtype=np.float32) * noise
            out[s : s + 2048] = f
        return torch.from_numpy(out)

    return make(q_pids, q_cams), make(g_pids, g_cams), q_pids, g_pids, q_cams, g_cams


MARKET = {
    "num_query": 3368,
    "num_gallery": 15913,
    "dim": 2048,
    "num_ids": 750,
    "num_cams": 6,
    "num_distractors": 2793,
}
# MSMT17 test split: 11,659 queries and 82,161 gallery images of 3,060 identities from 15 cameras.
MSMT = {
    "num_query": 11659,
    "num_gallery": 82161,
    "dim": 512,
    "num_ids": 3060,
    "num_cams": 15,
    "num_distractors": 0,
}


def per_query_loop(distmat, q_pids, g_pids, q_camids, g_camids, max_rank=50):
    """Upstream's python evaluator: one argsort and cumsum per query."""
    indices = np.argsort(distmat, axis=1)
    matches = (g_pids[indices] == q_pids[:, None]).astype(np.int32)
    all_cmc, all_ap, all_inp = [], [], []
    for q in range(distmat.shape[0]):
        order = indices[q]
        keep = ~((g_pids[order] == q_pids[q]) & (g_camids[order] == q_camids[q]))
        raw = matches[q][keep]
        if not raw.any():
            continue
        cmc = raw.cumsum()
        last = np.max(np.where(raw == 1))
        all_inp.append(cmc[last] / (last + 1.0))
        cmc[cmc > 1] = 1
        all_cmc.append(cmc[:max_rank])
        precision = raw.cumsum() / (np.arange(len(raw)) + 1.0)
        all_ap.append((precision * raw).sum() / raw.sum())
    return np.asarray(all_cmc).astype(np.float32).mean(0), np.asarray(all_ap), np.asarray(all_inp)


def _import_upstream(path: str):
    """Upstream's ``build_dist`` and Cython ``evaluate_cy`` from a checkout (run in a child process)."""
    import collections
    import collections.abc
    import types

    sys.path.insert(0, os.path.abspath(path))
    for name in [m for m in sys.modules if m == "fastreid" or m.startswith("fastreid.")]:
        del sys.modules[name]  # this process imported ours for the data; load theirs under the same name
    collections.Mapping = collections.abc.Mapping  # its testing.py predates Python 3.10
    sys.modules.setdefault(
        "sklearn", types.SimpleNamespace(metrics=None)
    )  # imported by its package, unused here
    evaluate_cy = importlib.import_module("fastreid.evaluation.rank_cylib.rank_cy").evaluate_cy
    build_dist = importlib.import_module("fastreid.utils.compute_dist").build_dist
    return build_dist, evaluate_cy


def run_stage(stage: str, sizes: dict, upstream: str | None = None) -> dict:
    from fastreid.evaluation.rank import evaluate_rank, evaluate_rank_from_features
    from fastreid.utils.compute_dist import build_dist

    qf, gf, q_pids, g_pids, q_cams, g_cams = synthetic_reid(**sizes)
    out: dict = {"rss_before_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}
    t0 = time.perf_counter()
    c0 = time.process_time()
    if stage == "upstream":
        up_build_dist, evaluate_cy = _import_upstream(upstream)
        c0, t0 = time.process_time(), time.perf_counter()  # importing is not part of the work
        dist = up_build_dist(qf, gf, "cosine")
        cmc, ap, inp = evaluate_cy(dist, q_pids, g_pids, q_cams, g_cams, 50, False)
        out.update({"rank1": float(cmc[0]), "mAP": float(np.mean(ap)), "mINP": float(np.mean(inp))})
    elif stage == "rerank_upstream_method":
        from fastreid.evaluation.rerank import re_ranking_knn_jaccard

        dist = re_ranking_knn_jaccard(qf, gf, k1=20, k2=6, lambda_value=0.3, metric="cosine")
        out["rerank_only_s"] = time.perf_counter() - t0
        cmc, ap, inp = evaluate_rank(dist, q_pids, g_pids, q_cams, g_cams)
        out.update({"rank1": float(cmc[0]), "mAP": float(ap.mean()), "mINP": float(inp.mean())})
    elif stage == "matmul":
        torch.mm(qf, gf.t())
    elif stage == "evaluate":
        cmc, ap, inp = evaluate_rank_from_features(qf, gf, q_pids, g_pids, q_cams, g_cams, "cosine")
        out.update({"rank1": float(cmc[0]), "mAP": float(ap.mean()), "mINP": float(inp.mean())})
    elif stage == "evaluate_dense":
        dist = build_dist(qf, gf, "cosine")
        cmc, ap, inp = evaluate_rank(dist, q_pids, g_pids, q_cams, g_cams)
        out.update({"rank1": float(cmc[0]), "mAP": float(ap.mean()), "mINP": float(inp.mean())})
    elif stage == "loop":
        dist = build_dist(qf, gf, "cosine")
        cmc, ap, inp = per_query_loop(dist, q_pids, g_pids, q_cams, g_cams)
        out.update({"rank1": float(cmc[0]), "mAP": float(ap.mean()), "mINP": float(inp.mean())})
    elif stage == "rerank":
        from fastreid.evaluation.rerank import re_ranking_features

        dist = re_ranking_features(qf, gf, k1=20, k2=6, lambda_value=0.3, metric="cosine")
        t_rr = time.perf_counter() - t0
        cmc, ap, inp = evaluate_rank(dist, q_pids, g_pids, q_cams, g_cams)
        out.update(
            {
                "rank1": float(cmc[0]),
                "mAP": float(ap.mean()),
                "mINP": float(inp.mean()),
                "rerank_only_s": t_rr,
            }
        )
    else:
        raise SystemExit(f"unknown stage {stage!r}")
    out["seconds"] = time.perf_counter() - t0
    out["cpu_seconds"] = time.process_time() - c0
    return out


def child(
    stage: str, msmt: bool, sizes: dict | None = None, upstream: str | None = None, threads: int = 0
) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--stage", stage] + (["--msmt"] if msmt else [])
    if sizes is not None:
        cmd += ["--sizes", json.dumps(sizes)]
    if upstream:
        cmd += ["--upstream", upstream]
    if threads:
        cmd += ["--threads", str(threads)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"stage {stage} failed:\n{proc.stderr}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    # Peak RSS of the fresh child process (its own getrusage), so stages do not mask each other.
    result["peak_rss_gb"] = result["self_peak_rss_gb"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--stage", help="run one stage in this process and print JSON (internal)")
    parser.add_argument("--msmt", action="store_true", help="also run the MSMT17-sized re-ranking")
    parser.add_argument("--stages", default="matmul,evaluate,evaluate_dense,rerank,loop")
    parser.add_argument(
        "--scale", action="store_true", help="evaluation cost against gallery size (see above)"
    )
    parser.add_argument("--rss", action="store_true", help="peak RSS at 2,500 vs 20,000 queries, g = 100,000")
    parser.add_argument(
        "--quick", action="store_true", help="--scale: small galleries (1k-8k, 512-d), for a smoke run"
    )
    parser.add_argument(
        "--upstream", help="--scale: upstream FastReID checkout with its Cython evaluator built"
    )
    parser.add_argument(
        "--upstream-max-gb",
        type=float,
        default=10.0,
        help="--scale: skip upstream where its dense matrices would need more memory (GB)",
    )
    parser.add_argument(
        "--rerank-max-gallery",
        type=int,
        default=16000,
        help="--scale: largest gallery for the re-ranking column (its time grows with N^2)",
    )
    parser.add_argument(
        "--threads", type=int, default=0, help="torch threads in each stage (default: all cores)"
    )
    parser.add_argument("--knn", action="store_true", help="re-ranking's kNN pass against faiss's flat index")
    parser.add_argument("--sizes", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.stage:
        sizes = json.loads(args.sizes) if args.sizes else (MSMT if args.msmt else MARKET)
        torch.set_num_threads(args.threads or max(1, os.cpu_count() or 1))
        res = run_stage(args.stage, sizes, args.upstream)
        res["self_peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        print(json.dumps(res))
        return
    if args.scale:
        scale(args)
        return
    if args.rss:
        rss_vs_queries(args)
        return
    if args.knn:
        knn_vs_faiss(args)
        return

    print(
        f"Market-1501-sized synthetic features: {MARKET}  (cores: {os.cpu_count()}, torch {torch.__version__})"
    )
    # The features alone (generation + copies) set a floor for every stage's memory.
    results = {}
    for stage in args.stages.split(","):
        results[stage] = child(stage, msmt=False)
    base = results.get("matmul", {}).get("seconds")
    print(f"{'stage':<16}{'seconds':>9}{'x matmul':>10}{'peak RSS GB':>13}   metrics")
    for stage, r in results.items():
        ratio = f"{r['seconds'] / base:.2f}" if base else "-"
        metrics = ", ".join(f"{k}={r[k]:.4f}" for k in ("rank1", "mAP", "mINP") if k in r)
        extra = f" (re-ranking alone {r['rerank_only_s']:.2f} s)" if "rerank_only_s" in r else ""
        print(f"{stage:<16}{r['seconds']:>9.2f}{ratio:>10}{r['peak_rss_gb']:>13.2f}   {metrics}{extra}")
    if "evaluate" in results and "loop" in results:
        print(
            f"speed-up of our evaluation over the per-query loop: {results['loop']['seconds'] / results['evaluate']['seconds']:.1f}x"
        )
    if args.msmt:
        print(f"\nMSMT17-sized re-ranking: {MSMT}")
        r = child("rerank", msmt=True)
        print(
            f"rerank (MSMT)  {r['seconds']:.1f} s total, re-ranking alone {r['rerank_only_s']:.1f} s, "
            f"peak RSS {r['peak_rss_gb']:.2f} GB, rank1={r['rank1']:.4f} mAP={r['mAP']:.4f}"
        )


def scaled_sizes(num_gallery: int, dim: int) -> dict:
    """MSMT17's proportions: 11,659 queries per 82,161 gallery images, ~27 images per identity, 15 cameras;
    noise scaled with dim ** 0.25 (distance gaps grow with the dimension) so that metrics stay in a trained
    model's range."""
    return {
        "num_query": max(50, round(num_gallery * 11659 / 82161)),
        "num_gallery": num_gallery,
        "dim": dim,
        "num_ids": max(10, num_gallery // 27),
        "num_cams": 15,
        "num_distractors": 0,
        "noise": 2.4 * (dim / 2048) ** 0.25,
    }


def _load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def _exponent(cells: list, seconds: list) -> float:
    return float(np.polyfit(np.log(cells), np.log(seconds), 1)[0]) if len(cells) > 1 else float("nan")


def scale(args) -> None:
    galleries, dim = ([1000, 2000, 4000, 8000], 512) if args.quick else ([4000, 16000, 64000, 82161], 2048)
    threads = args.threads or 1
    print(
        f"Evaluation against gallery size: queries in MSMT17's proportion, {dim}-d, cosine, {threads} torch "
        f"thread(s); CPU seconds of the work in a fresh child process per cell ({os.cpu_count()} cores)"
    )
    rows, cells, ours_cpu, up_cells, up_cpu = [], [], [], [], []
    for g in galleries:
        sizes = scaled_sizes(g, dim)
        n_cells = sizes["num_query"] * g
        r = child("evaluate", False, sizes, threads=threads)
        row = {
            "gallery": g,
            "queries": sizes["num_query"],
            "ours_cpu": r["cpu_seconds"],
            "ours_wall": r["seconds"],
            "ours_rss": r["peak_rss_gb"],
            "metrics": f"R1 {r['rank1']:.3f} mAP {r['mAP']:.3f}",
            "load": _load(),
        }
        cells.append(n_cells)
        ours_cpu.append(r["cpu_seconds"])
        if args.upstream:
            need_gb = n_cells * 20 / 2**30  # float32 matrix + int64 argsort + int32 matches (+ features)
            if need_gb <= args.upstream_max_gb:
                u = child("upstream", False, sizes, upstream=args.upstream, threads=threads)
                row.update(up_cpu=u["cpu_seconds"], up_rss=u["peak_rss_gb"])
                if abs(u["mAP"] - r["mAP"]) > 1e-4 or abs(u["rank1"] - r["rank1"]) > 1e-4:
                    row["metrics"] += f" (upstream: R1 {u['rank1']:.3f} mAP {u['mAP']:.3f})"
                up_cells.append(n_cells)
                up_cpu.append(u["cpu_seconds"])
            else:
                row["up_note"] = f"skipped: needs ~{need_gb:.0f} GB"
        if g <= args.rerank_max_gallery:
            rr = child("rerank_upstream_method", False, sizes, threads=threads)
            row.update(rr_cpu=rr["cpu_seconds"], rr_rss=rr["peak_rss_gb"])
        rows.append(row)
        _print_scale_row(row)
    print(
        f"fitted exponent, CPU ~ (queries x gallery)^e: ours {_exponent(cells, ours_cpu):.3f}"
        + (f", upstream {_exponent(up_cells, up_cpu):.3f}" if len(up_cells) > 1 else "")
    )


def _print_scale_row(row: dict) -> None:
    up = row.get("up_cpu")
    ratio = f"{row['ours_cpu'] / up:.2f}x" if up else row.get("up_note", "-")
    text = (
        f"g {row['gallery']:>6} q {row['queries']:>6}: ours {row['ours_cpu']:7.2f} CPU-s ({row['ours_wall']:.2f} s wall, "
        f"peak RSS {row['ours_rss']:.2f} GB)"
    )
    if up:
        text += f"; upstream {up:7.2f} CPU-s (peak RSS {row['up_rss']:.2f} GB); ours/upstream {ratio}"
    elif "up_note" in row:
        text += f"; upstream {ratio}"
    if "rr_cpu" in row:
        text += f"; re-ranking (knn_jaccard) {row['rr_cpu']:.2f} CPU-s, peak RSS {row['rr_rss']:.2f} GB"
    print(text + f"; {row['metrics']}; {row['load']}", flush=True)


def rss_vs_queries(args) -> None:
    """Peak resident memory of our chunked evaluation beyond the features, at two query counts."""
    dim, g = 128, 100_000
    print(
        f"Peak RSS of features -> metrics, g = {g:,}, {dim}-d (fresh child per run; 'growth' is the peak "
        "during evaluation above the peak before it)"
    )
    for q in (2500, 20000):
        sizes = {
            "num_query": q,
            "num_gallery": g,
            "dim": dim,
            "num_ids": 2000,
            "num_cams": 15,
            "num_distractors": 0,
            "noise": 2.4 * (dim / 2048) ** 0.25,
        }
        r = child("evaluate", False, sizes, threads=args.threads or 1)
        growth = (r["peak_rss_gb"] - r["rss_before_gb"]) * 1024
        print(
            f"queries {q:>6}: peak RSS {r['peak_rss_gb']:.2f} GB, growth during evaluation {growth:.0f} MB, "
            f"{r['cpu_seconds']:.1f} CPU-s; {_load()}",
            flush=True,
        )


def knn_vs_faiss(args) -> None:
    """The all-pairs k-nearest-neighbour pass of re-ranking: ours (upper-triangle blocks, each distance
    computed once) against faiss's exact flat index on the same features, 1 thread each."""
    import faiss

    from fastreid.utils.kreciprocal.neighbours import FeatureNeighbours

    torch.set_num_threads(args.threads or 1)
    faiss.omp_set_num_threads(args.threads or 1)
    k = 42  # what re-ranking keeps for k1 = 20: 2 (k1 + 1)
    for g, dim in ((8000, 512), (16000, 2048)):
        qf, gf, *_ = synthetic_reid(**scaled_sizes(g, dim))
        x = torch.cat([qf, gf]).numpy()
        c0 = time.process_time()
        ours = FeatureNeighbours([qf, gf], "euclidean", k)
        c1 = time.process_time()
        index = faiss.IndexFlatL2(dim)
        index.add(x)
        _, idx = index.search(x, k)
        c2 = time.process_time()
        print(
            f"N {len(x):>6}, {dim}-d, k {k}: ours {c1 - c0:.2f} CPU-s, faiss IndexFlatL2 {c2 - c1:.2f} CPU-s "
            f"(ours/faiss {(c1 - c0) / (c2 - c1):.2f}x); same neighbours {np.mean(ours.idx == idx):.4f}; {_load()}",
            flush=True,
        )


if __name__ == "__main__":
    main()
