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
"""

from __future__ import annotations

import argparse
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


def synthetic_reid(num_query: int, num_gallery: int, dim: int, num_ids: int, num_cams: int,
                   num_distractors: int, noise: float = 2.4, seed: int = 0):
    """Features with a re-ID structure: identity centre + camera bias + noise.

    Every test identity has about ``num_query / num_ids`` queries (distinct cameras where possible) and
    the rest of its images in the gallery; ``num_distractors`` gallery images have pid 0 (Market's
    distractor id) and random features.
    """
    rng = np.random.default_rng(seed)
    ids = np.arange(1, num_ids + 1)
    q_pids = np.concatenate([ids, rng.choice(ids, num_query - num_ids)])
    g_pids = np.concatenate([ids, rng.choice(ids, num_gallery - num_ids - num_distractors),
                             np.zeros(num_distractors, np.int64)])
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


MARKET = {"num_query": 3368, "num_gallery": 15913, "dim": 2048, "num_ids": 750, "num_cams": 6, "num_distractors": 2793}
# MSMT17 test split: 11,659 queries and 82,161 gallery images of 3,060 identities from 15 cameras.
MSMT = {"num_query": 11659, "num_gallery": 82161, "dim": 512, "num_ids": 3060, "num_cams": 15, "num_distractors": 0}


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


def run_stage(stage: str, sizes: dict) -> dict:
    from fastreid.evaluation.distance import build_dist
    from fastreid.evaluation.rank import evaluate_rank, evaluate_rank_from_features

    qf, gf, q_pids, g_pids, q_cams, g_cams = synthetic_reid(**sizes)
    out: dict = {}
    t0 = time.perf_counter()
    if stage == "matmul":
        torch.mm(qf, gf.t())
    elif stage == "evaluate":
        cmc, ap, inp = evaluate_rank_from_features(qf, gf, q_pids, g_pids, q_cams, g_cams, "cosine")
        out = {"rank1": float(cmc[0]), "mAP": float(ap.mean()), "mINP": float(inp.mean())}
    elif stage == "evaluate_dense":
        dist = build_dist(qf, gf, "cosine")
        cmc, ap, inp = evaluate_rank(dist, q_pids, g_pids, q_cams, g_cams)
        out = {"rank1": float(cmc[0]), "mAP": float(ap.mean()), "mINP": float(inp.mean())}
    elif stage == "loop":
        dist = build_dist(qf, gf, "cosine")
        cmc, ap, inp = per_query_loop(dist, q_pids, g_pids, q_cams, g_cams)
        out = {"rank1": float(cmc[0]), "mAP": float(ap.mean()), "mINP": float(inp.mean())}
    elif stage == "rerank":
        from fastreid.evaluation.rerank import re_ranking_features

        dist = re_ranking_features(qf, gf, k1=20, k2=6, lambda_value=0.3, metric="cosine")
        t_rr = time.perf_counter() - t0
        cmc, ap, inp = evaluate_rank(dist, q_pids, g_pids, q_cams, g_cams)
        out = {"rank1": float(cmc[0]), "mAP": float(ap.mean()), "mINP": float(inp.mean()), "rerank_only_s": t_rr}
    else:
        raise SystemExit(f"unknown stage {stage!r}")
    out["seconds"] = time.perf_counter() - t0
    return out


def child(stage: str, msmt: bool) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--stage", stage] + (["--msmt"] if msmt else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"stage {stage} failed:\n{proc.stderr}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    # Peak RSS of the fresh child process (its own getrusage), so stages do not mask each other.
    result["peak_rss_gb"] = result["self_peak_rss_gb"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stage", help="run one stage in this process and print JSON (internal)")
    parser.add_argument("--msmt", action="store_true", help="also run the MSMT17-sized re-ranking")
    parser.add_argument("--stages", default="matmul,evaluate,evaluate_dense,rerank,loop")
    args = parser.parse_args()

    if args.stage:
        sizes = MSMT if args.msmt else MARKET
        torch.set_num_threads(max(1, os.cpu_count() or 1))
        res = run_stage(args.stage, sizes)
        res["self_peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        print(json.dumps(res))
        return

    print(f"Market-1501-sized synthetic features: {MARKET}  (cores: {os.cpu_count()}, torch {torch.__version__})")
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
        print(f"speed-up of our evaluation over the per-query loop: {results['loop']['seconds'] / results['evaluate']['seconds']:.1f}x")
    if args.msmt:
        print(f"\nMSMT17-sized re-ranking: {MSMT}")
        r = child("rerank", msmt=True)
        print(f"rerank (MSMT)  {r['seconds']:.1f} s total, re-ranking alone {r['rerank_only_s']:.1f} s, "
              f"peak RSS {r['peak_rss_gb']:.2f} GB, rank1={r['rank1']:.4f} mAP={r['mAP']:.4f}")


if __name__ == "__main__":
    main()
