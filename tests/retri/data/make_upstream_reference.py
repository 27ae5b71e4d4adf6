"""Writes upstream_retri_metrics.json: Recall@K by upstream FastReID's own code
(JDAI-CV/fast-reid, ``projects/FastRetri/fastretri/retri_evaluator.py``: ``recall_at_ks``) and
mAP@R by pytorch-metric-learning (``AccuracyCalculator``, ``mean_average_precision_at_r``;
upstream has no mAP@R) on the cases of ../retri_cases.py.

    PYTHONPATH=/path/to/pytorch_metric_learning python make_upstream_reference.py /path/to/fast-reid upstream_retri_metrics.json

Only that file of upstream is loaded: its ``fastreid`` imports (the evaluator base class and
``comm``) are stand-ins, and its GPU faiss index is faiss' CPU index of the same kind (upstream
calls ``faiss.GpuIndexFlatIP`` / ``GpuIndexFlatL2`` on ``StandardGpuResources``; this machine has
no GPU). scikit-learn, which pytorch-metric-learning imports for its clustering scores, is a
stand-in too. Before writing, each case is checked to be robust to rounding: a float64 numpy
evaluation gives the same numbers with the similarities moved by up to 1e-5 in either direction,
so the recorded numbers do not hang on the last bits of a CPU's float32 sums. Not run by the test
suite (it needs upstream's code); the JSON it wrote is stored next to it.
"""

import importlib.util
import json
import os
import sys
import types

import faiss
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import retri_cases  # noqa: E402


def load_upstream(upstream: str):
    for name in ("fastreid", "fastreid.evaluation", "fastreid.utils"):
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["fastreid.evaluation"].DatasetEvaluator = type("DatasetEvaluator", (), {})
    sys.modules["fastreid.utils.comm"] = types.ModuleType("fastreid.utils.comm")
    sys.modules["fastreid.utils"].comm = sys.modules["fastreid.utils.comm"]
    # the GPU index upstream asks for, as the CPU index of the same kind
    faiss.StandardGpuResources = lambda: None
    faiss.GpuIndexFlatConfig = lambda: types.SimpleNamespace(device=0)
    faiss.GpuIndexFlatIP = lambda res, dim, config: faiss.IndexFlatIP(dim)
    faiss.GpuIndexFlatL2 = lambda res, dim, config: faiss.IndexFlatL2(dim)
    path = os.path.join(upstream, "projects", "FastRetri", "fastretri", "retri_evaluator.py")
    spec = importlib.util.spec_from_file_location("upstream_retri_evaluator", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.recall_at_ks


def pml_map_at_r(query, query_labels, gallery, gallery_labels, cosine):
    sklearn = types.ModuleType("sklearn")
    metrics = types.ModuleType("sklearn.metrics")
    metrics.adjusted_mutual_info_score = metrics.normalized_mutual_info_score = None
    sklearn.metrics = metrics
    sys.modules.setdefault("sklearn", sklearn)
    sys.modules.setdefault("sklearn.metrics", metrics)
    from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator  # after the stand-in

    def prep(x):
        x = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
        return torch.nn.functional.normalize(x, dim=1) if cosine else x

    calc = AccuracyCalculator(
        include=("mean_average_precision_at_r",), k="max_bin_count", device=torch.device("cpu")
    )
    if gallery is None:
        acc = calc.get_accuracy(
            prep(query), torch.from_numpy(query_labels), prep(query), torch.from_numpy(query_labels), True
        )
    else:
        acc = calc.get_accuracy(
            prep(query),
            torch.from_numpy(query_labels),
            prep(gallery),
            torch.from_numpy(gallery_labels),
            False,
        )
    return float(acc["mean_average_precision_at_r"])


def numpy_metrics(query, q_labels, gallery, g_labels, ks, cosine, jitter=0.0, seed=0):
    """Recall@K fractions and mAP@R by sorting float64 similarities (``jitter``: moved at random)."""
    self_search = gallery is None
    q = query.astype(np.float64)
    g = q if self_search else gallery.astype(np.float64)
    gl = q_labels if self_search else g_labels
    if cosine:
        q = q / np.linalg.norm(q, axis=1, keepdims=True)
        g = g / np.linalg.norm(g, axis=1, keepdims=True)
        score = q @ g.T
    else:
        score = -((q**2).sum(1)[:, None] + (g**2).sum(1)[None, :] - 2 * q @ g.T)
    if jitter:
        score = score + np.random.default_rng(seed).uniform(-jitter, jitter, score.shape)
    if self_search:
        np.fill_diagonal(score, -np.inf)
    order = np.argsort(-score, axis=1, kind="stable")
    if self_search:
        order = order[:, :-1]
    hits = gl[order] == q_labels[:, None]
    recall = {k: float(hits[:, :k].any(1).mean()) for k in ks}
    r = hits.sum(1)
    aps = []
    for row, rr in zip(hits, r):
        if rr == 0:
            continue
        top = row[:rr]
        aps.append(float((np.cumsum(top) / np.arange(1, rr + 1) * top).sum() / rr))
    return recall, float(np.mean(aps))


def main() -> None:
    upstream, target = sys.argv[1], sys.argv[2]
    recall_at_ks = load_upstream(upstream)
    records = []
    for name, spec in retri_cases.CASES.items():
        data = retri_cases.draw(name)
        if "features" in data:
            q, ql, g, gl = data["features"], data["labels"], None, None
        else:
            q, ql, g, gl = (
                data["query_features"],
                data["query_labels"],
                data["gallery_features"],
                data["gallery_labels"],
            )
        ks, cosine = spec["ks"], spec["cosine"]
        exact = numpy_metrics(q, ql, g, gl, ks, cosine)
        for seed in range(5):  # robust to rounding: the same under small moves of every similarity
            assert numpy_metrics(q, ql, g, gl, ks, cosine, jitter=1e-5, seed=seed) == exact, name
        if g is None:
            upstream_recall = recall_at_ks(torch.from_numpy(q), ql, ks, cosine=cosine)
        else:
            upstream_recall = recall_at_ks(
                torch.from_numpy(q), ql, ks, torch.from_numpy(g), gl, cosine=cosine
            )
        map_r = pml_map_at_r(q, ql, g, gl, cosine)
        for k in ks:
            assert abs(upstream_recall[k] - round(exact[0][k] * 100, 2)) < 1e-9, (name, k)
        assert abs(map_r - exact[1]) < 1e-6, (name, map_r, exact[1])
        records.append(
            {
                "name": name,
                "ks": ks,
                "cosine": cosine,
                "upstream_recall_at_ks": {str(k): float(v) for k, v in upstream_recall.items()},
                "pml_map_at_r": map_r,
                "numpy_float64": {"recall": {str(k): v for k, v in exact[0].items()}, "map_at_r": exact[1]},
            }
        )
        print(name, upstream_recall, map_r)
    with open(target, "w", encoding="utf-8") as f:
        json.dump(
            {
                "source": "JDAI-CV/fast-reid projects/FastRetri/fastretri/retri_evaluator.py (recall_at_ks); "
                "pytorch-metric-learning 2.9.0 AccuracyCalculator (mean_average_precision_at_r)",
                "cases": records,
            },
            f,
            indent=1,
        )
        f.write("\n")


if __name__ == "__main__":
    main()
