"""Writes cluster_contrast_reference.npz by running cluster-contrast-reid's own code
(alibaba/cluster-contrast-reid, 57b62e9), the reference of the ClusterContrast family.

Run with that repository's ``clustercontrast/`` folder copied to a scratch folder CC (faiss-cpu
and scikit-learn installed; nothing of it is imported by the test suite):

    python make_cluster_contrast_reference.py /tmp/cc-scratch cluster_contrast_reference.npz

Functions used: ``clustercontrast/utils/faiss_rerank.py`` ``compute_jaccard_distance``
(``search_option=3``, its CPU faiss search) at cluster-contrast-reid's settings (k1 30, k2 6) and
at its function's defaults (k1 20, k2 6); the pseudo labels its training script
(``examples/cluster_contrast_train_usl.py``) makes from that distance, scikit-learn's
``DBSCAN(eps=0.6, min_samples=4, metric="precomputed")``; and ``clustercontrast/models/cm.py``
``cm`` (the cluster memory's forward, backward and momentum update) in float64. The features are
the first draw (from seed 2032 on) whose neighbour ranks, and whose Jaccard distances around
``eps``, no float32 rounding can tip (``knn_conditioning``).
"""

import importlib.util
import os
import sys
import types

import numpy as np
import torch
from sklearn.cluster import DBSCAN

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from knn_conditioning import MIN_GAP, neighbour_rank_gap

SETTINGS = ((30, 6), (20, 6))
EPS, MIN_SAMPLES = 0.6, 4


def list_sizes() -> list[int]:
    """The neighbour lists the Jaccard distance reads: k1 (faiss's top-k1), round(k1 / 2) + 1, k2."""
    return [k for k1, k2 in SETTINGS for k in (k1, int(np.around(k1 / 2)) + 1, k2)]


def load(cc: str, package: str, names: list[str]) -> dict:
    """cluster-contrast-reid's modules ``names`` of ``clustercontrast/<package>`` without its
    package ``__init__`` (which imports every model and data set)."""
    pkg = types.ModuleType("ccref")
    pkg.__path__ = [os.path.join(cc, "clustercontrast", package)]
    sys.modules["ccref"] = pkg
    out = {}
    for name in names:
        spec = importlib.util.spec_from_file_location(
            f"ccref.{name}", os.path.join(pkg.__path__[0], f"{name}.py")
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules[f"ccref.{name}"] = module
        spec.loader.exec_module(module)
        out[name] = module
    return out


def draw(seed: int) -> dict:
    """240 unit features in 24 dimensions: 228 of 16 identities, 12 loners (identities 16..27)."""
    rng = np.random.default_rng(seed)
    n, ids, loners, dim = 240, 16, 12, 24
    pids = np.concatenate([rng.integers(0, ids, n - loners), np.arange(ids, ids + loners)])
    centres = np.concatenate([rng.normal(size=(ids, dim)), 3 * rng.normal(size=(loners, dim))])
    feats = centres[pids] + 0.7 * rng.normal(size=(n, dim))
    feats = (feats / np.linalg.norm(feats, axis=1, keepdims=True)).astype(np.float32)
    return {"feats": feats, "pids": pids, "seed": np.int64(seed)}


def record(rerank, data: dict) -> dict:
    out = dict(data)
    feats = torch.from_numpy(data["feats"])
    for k1, k2 in SETTINGS:
        out[f"jaccard_k{k1}_{k2}"] = rerank.compute_jaccard_distance(feats, k1=k1, k2=k2, search_option=3)
    labels = DBSCAN(eps=EPS, min_samples=MIN_SAMPLES, metric="precomputed", n_jobs=-1).fit_predict(
        out["jaccard_k30_6"]
    )
    out["labels_k30_6_eps0.6_min4"] = labels.astype(np.int64)
    return out


def well_conditioned(out: dict) -> bool:
    jac = out["jaccard_k30_6"]
    near_eps = np.abs(jac.astype(np.float64) - EPS).min()
    labels = out["labels_k30_6_eps0.6_min4"]
    return (
        neighbour_rank_gap(out["feats"], list_sizes()) >= MIN_GAP
        and near_eps >= MIN_GAP
        and labels.max() >= 3
        and (labels < 0).any()  # clusters and outliers: a partition worth comparing
    )


def memory_case(cm_module) -> dict:
    """``cm``'s outputs, the inputs' gradient and the memory after the backward pass, float64."""
    rng = np.random.default_rng(7)
    inputs = rng.normal(size=(8, 16))
    inputs /= np.linalg.norm(inputs, axis=1, keepdims=True)
    memory = rng.normal(size=(5, 16))
    memory /= np.linalg.norm(memory, axis=1, keepdims=True)
    targets = np.array([0, 3, 3, 1, 4, 3, 0, 2])
    grad_outputs = rng.normal(size=(8, 5))
    x = torch.tensor(inputs, requires_grad=True)
    mem = torch.tensor(memory)
    out = cm_module.cm(x, torch.tensor(targets), mem, momentum=0.25)  # exact in its float32 tensor
    out.backward(torch.tensor(grad_outputs))
    return {
        "cm_inputs": inputs,
        "cm_memory_before": memory,
        "cm_targets": targets,
        "cm_grad_outputs": grad_outputs,
        "cm_momentum": np.float64(0.25),
        "cm_outputs": out.detach().numpy(),
        "cm_grad_inputs": x.grad.numpy(),
        "cm_memory_after": mem.numpy(),
    }


def main(cc: str, out_path: str) -> None:
    rerank = load(cc, "utils", ["faiss_utils", "faiss_rerank"])["faiss_rerank"]
    cm_module = load(cc, "models", ["cm"])["cm"]
    for seed in range(2032, 3032):
        out = record(rerank, draw(seed))
        if well_conditioned(out):
            break
    else:
        raise SystemExit("no well-conditioned draw among 1000 seeds")
    out.update(memory_case(cm_module))
    np.savez_compressed(out_path, **out)
    labels = out["labels_k30_6_eps0.6_min4"]
    print(f"seed {seed} written to {out_path}: {labels.max() + 1} clusters, {(labels < 0).sum()} outliers")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
