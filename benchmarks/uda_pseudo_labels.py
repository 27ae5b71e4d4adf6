#!/usr/bin/env python
"""The pseudo-label step of ClusterContrast at scale: k-reciprocal Jaccard distance + DBSCAN for
N images of 2048-d features, as the sparse graph (``knn_jaccard_graph``: the neighbour pass, the
sparse encoding, the pairs within eps; DBSCAN on the graph) beside the dense reference
(``compute_jaccard_distance``'s N x N matrix, DBSCAN on it), which is run at the smallest size only.

Every case runs in a process of its own, so that its peak memory (the process's maximum resident
size, the features and Python with torch included) is its own. Prints, per case, the time of each
part and the peak, then the growth of the parts after the neighbour pass against N log N, and at
the size where both run, whether the sparse and the dense pseudo labels are the same.

The features: N / 15 identities of 15 images on average (Market-1501 has 17), each image its
identity's centre plus as much noise (unit rows, cosine ~0.5 within an identity), and one image in
ten alone (an identity of its own): what a trained re-ID model gives, roughly; the clustering finds
the identities at eps 0.6 and leaves the loners out.

    python benchmarks/uda_pseudo_labels.py                       # 10k, 50k, 100k (+ dense at 10k)
    python benchmarks/uda_pseudo_labels.py --sizes 2000 5000 --dense-at 2000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def features(n: int, dim: int, seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    ids = max(1, n // 15)
    owner = rng.integers(0, ids, n)
    loners = np.flatnonzero(rng.random(n) < 0.1)  # one image of its own: outliers
    owner[loners] = ids + np.arange(len(loners))
    x = rng.standard_normal((ids + len(loners), dim), dtype=np.float32)[owner]
    for s in range(0, n, 8192):  # in chunks: no second N x D array
        chunk = x[s : s + 8192]
        chunk += rng.standard_normal(chunk.shape, dtype=np.float32)
        chunk /= np.linalg.norm(chunk, axis=1, keepdims=True)
    return x


def peak_rss_gb() -> float:
    import resource

    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kilobytes on Linux
    return kb / 1024**2 if sys.platform != "darwin" else kb / 1024**3


def run_case(
    n: int, dim: int, mode: str, k1: int, k2: int, eps: float, min_samples: int, labels_out: str
) -> dict:
    """One case in this process; returns its timings (seconds) and peak memory (GB)."""
    from fastreid.utils.threads import configure_threads

    configure_threads()
    import numpy as np
    import torch

    from fastreid.projects.uda import dbscan_labels

    dbscan_labels(np.zeros((2, 2), np.float32), eps, 1)  # scikit-learn imported before the clock starts
    x = features(n, dim)
    before_gb = peak_rss_gb()  # Python, torch, scikit-learn and the features
    times: dict[str, float] = {}
    start = time.perf_counter()
    if mode == "dense":
        from fastreid.utils.compute_dist import compute_jaccard_distance

        dist = compute_jaccard_distance(x, k1=k1, k2=k2)
        times["jaccard (dense)"] = time.perf_counter() - start
        mark = time.perf_counter()
        labels = dbscan_labels(dist, eps, min_samples)
        times["dbscan"] = time.perf_counter() - mark
    else:
        import scipy.sparse

        from fastreid.utils.kreciprocal.neighbours import FeatureNeighbours, neighbours_kept
        from fastreid.utils.kreciprocal.sparse_jaccard import encode, jaccard_graph

        # knn_jaccard_graph's steps one by one, to time them
        nb = FeatureNeighbours([torch.from_numpy(x)], "euclidean", k=neighbours_kept(k1, k2))
        times["neighbours"] = time.perf_counter() - start
        mark = time.perf_counter()
        indptr, indices, data = encode(nb, k1, k2, knn_sq_scale=1.0)
        del nb
        times["encode"] = time.perf_counter() - mark
        mark = time.perf_counter()
        g_ptr, g_ind, g_dist = jaccard_graph(indptr, indices, data, n, eps)
        times["graph"] = time.perf_counter() - mark
        mark = time.perf_counter()
        graph = scipy.sparse.csr_matrix((g_dist, g_ind, g_ptr), shape=(n, n))
        labels = dbscan_labels(graph, eps, min_samples)
        times["dbscan"] = time.perf_counter() - mark
        times["graph entries per image"] = len(g_ind) / n
    times["total"] = time.perf_counter() - start
    np.save(labels_out, labels)
    return {
        "n": n,
        "mode": mode,
        "times": times,
        "peak_gb": peak_rss_gb(),
        "before_gb": before_gb,
        "features_gb": x.nbytes / 1024**3,
        "clusters": int(labels.max()) + 1,
        "outliers": float((labels < 0).mean()),
        "threads": torch.get_num_threads(),
    }


def spawn(args: argparse.Namespace, n: int, mode: str) -> dict:
    labels = os.path.join(args.scratch, f"labels-{mode}-{n}.npy")
    cmd = [sys.executable, os.path.abspath(__file__), "--one", str(n), mode, labels, "--dim", str(args.dim)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the {mode} case at {n} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["labels"] = labels
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 50_000, 100_000])
    parser.add_argument(
        "--dense-at", type=int, nargs="*", default=[10_000], help="sizes to run the dense reference at"
    )
    parser.add_argument("--dim", type=int, default=2048)
    parser.add_argument("--scratch", default="/tmp/fastreid-uda-bench")
    parser.add_argument("--one", nargs=3, metavar=("N", "MODE", "LABELS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    k1, k2, eps, min_samples = 30, 6, 0.6, 4  # cluster-contrast-reid's settings
    if args.one:
        n, mode, labels = int(args.one[0]), args.one[1], args.one[2]
        print(json.dumps(run_case(n, args.dim, mode, k1, k2, eps, min_samples, labels)))
        return

    import numpy as np

    os.makedirs(args.scratch, exist_ok=True)
    print(
        f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f} at the start; k1 {k1}, k2 {k2}, eps {eps}"
    )
    results = []
    for n in sorted(set(args.sizes) | set(args.dense_at)):
        for mode in ("sparse", "dense") if n in args.dense_at else ("sparse",):
            if mode == "sparse" and n not in args.sizes:
                continue
            r = spawn(args, n, mode)
            results.append(r)
            parts = ", ".join(f"{k} {v:.1f}" for k, v in r["times"].items())
            print(
                f"N={n:>7} {mode:>6}: {r['times']['total']:7.1f} s, peak {r['peak_gb']:.2f} GB (before the step "
                f"{r['before_gb']:.2f} GB, features {r['features_gb']:.2f} GB), {r['clusters']} clusters, {100 * r['outliers']:.1f}% "
                f"outliers, {r['threads']} threads  [{parts}]",
                flush=True,
            )
    sparse = [r for r in results if r["mode"] == "sparse"]
    for r in results:
        if r["mode"] == "dense":
            same = next((s for s in sparse if s["n"] == r["n"]), None)
            if same is not None:
                equal = np.array_equal(np.load(same["labels"]), np.load(r["labels"]))
                ratio = r["times"]["total"] / same["times"]["total"]
                print(
                    f"N={r['n']}: sparse / dense: time {same['times']['total']:.1f} / {r['times']['total']:.1f} s "
                    f"(dense {ratio:.2f}x the sparse time), peak {same['peak_gb']:.2f} / {r['peak_gb']:.2f} GB; "
                    f"pseudo labels {'identical' if equal else 'DIFFERENT'}"
                )
    if len(sparse) > 1:
        base = sparse[0]
        for r in sparse[1:]:
            grow = r["n"] * np.log(r["n"]) / (base["n"] * np.log(base["n"]))
            after = sum(r["times"][k] for k in ("encode", "graph", "dbscan"))
            after0 = sum(base["times"][k] for k in ("encode", "graph", "dbscan"))
            print(
                f"N {base['n']} -> {r['n']}: after the neighbour pass {after0:.1f} -> {after:.1f} s "
                f"(x{after / after0:.2f}; N log N grows x{grow:.2f}); neighbour pass "
                f"x{r['times']['neighbours'] / base['times']['neighbours']:.1f} (N^2: x{(r['n'] / base['n']) ** 2:.0f})"
            )
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
