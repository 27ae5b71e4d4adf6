"""Writes upstream_verification.json by running upstream FastReID's own verification functions
(JDAI-CV/fast-reid, ``projects/FastFace/fastface/verification.py``: ``evaluate`` and
``calculate_accuracy``) on generated embeddings and pair labels.

    PYTHONPATH=/path/with/scikit-learn python make_upstream_reference.py /path/to/fast-reid upstream_verification.json

Only that file of upstream is loaded; it needs numpy, scipy and scikit-learn (``KFold``, ``PCA``).
The embeddings are small integer arrays (stored in the JSON) turned into floats by
:func:`embeddings_of`, which the test calls too, so both sides see the same floats. Cases: pairs
whose identities are separable, the same in float32, a fold count that does not divide the pairs,
5 folds, a PCA to 4 dimensions, and a set with no different pair (FPR's denominator 0).
Not run by the test suite (it needs upstream's code and scikit-learn); the JSON is stored next to it.
"""

import importlib.util
import json
import os
import sys

import numpy as np


def embeddings_of(ints, dtype):
    """L2-normalised rows of the stored integers, in ``dtype``."""
    x = np.asarray(ints, dtype=np.float64)
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(dtype)


def load_upstream(upstream):
    path = os.path.join(upstream, "projects", "FastFace", "fastface", "verification.py")
    spec = importlib.util.spec_from_file_location("upstream_verification", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pairs(rng, n_pairs, dim, same_ratio=0.5, noise=6):
    """Integer embeddings of ``n_pairs`` pairs: a same pair is one centre plus noise twice."""
    same = rng.random(n_pairs) < same_ratio
    rows = []
    for s in same:
        a = rng.integers(-20, 21, dim)
        b = a if s else rng.integers(-20, 21, dim)
        rows.append(a + rng.integers(-noise, noise + 1, dim))
        rows.append(b + rng.integers(-noise, noise + 1, dim))
    ints = np.stack(rows)
    ints[np.all(ints == 0, axis=1), 0] = 1  # no zero row
    return ints.astype(int), same


def cases():
    """``(data sets, cases)``: each data set's integer embeddings and pair labels, stored once."""
    rng = np.random.default_rng(20261126)
    data = {"separable": pairs(rng, 100, 8), "noisy": pairs(rng, 107, 6, noise=12)}
    data["all_same"] = pairs(rng, 40, 4, same_ratio=1.1)
    out = [
        {"name": "separable", "data": "separable", "dtype": "float64", "folds": 10, "pca": 0},
        {"name": "separable_float32", "data": "separable", "dtype": "float32", "folds": 10, "pca": 0},
        {"name": "five_folds", "data": "separable", "dtype": "float64", "folds": 5, "pca": 0},
        {"name": "pca4", "data": "separable", "dtype": "float64", "folds": 10, "pca": 4},
        {"name": "uneven_folds", "data": "noisy", "dtype": "float64", "folds": 10, "pca": 0},
        {"name": "no_different_pair", "data": "all_same", "dtype": "float64", "folds": 10, "pca": 0},
    ]
    return data, out


def main(upstream, output):
    verification = load_upstream(upstream)
    data, all_cases = cases()
    records = []
    for case in all_cases:
        ints, same = data[case["data"]]
        case = {**case, "ints": ints, "same": same}
        emb = embeddings_of(case["ints"], case["dtype"])
        tpr, fpr, acc, thr = verification.evaluate(
            emb, list(case["same"]), nrof_folds=case["folds"], pca=case["pca"]
        )
        dist = np.sum(np.square(emb[0::2] - emb[1::2]), 1)
        single = [verification.calculate_accuracy(t, dist, case["same"]) for t in (0.5, 1.0, 2.0)]
        records.append(
            {
                "name": case["name"],
                "dtype": case["dtype"],
                "folds": case["folds"],
                "pca": case["pca"],
                "data": case["data"],
                "upstream": {
                    # the ROC at every 10th threshold of the 400, and the sums over all 400
                    "tpr_every_10th": tpr[::10].tolist(),
                    "fpr_every_10th": fpr[::10].tolist(),
                    "tpr_sum": float(tpr.sum()),
                    "fpr_sum": float(fpr.sum()),
                    "accuracy": acc.tolist(),
                    "best_thresholds": thr.tolist(),
                    "calculate_accuracy_at_0.5_1_2": [list(s) for s in single],
                },
            }
        )
    with open(output, "w", encoding="utf-8") as f:
        stored = {k: {"ints": v[0].tolist(), "same": [bool(x) for x in v[1]]} for k, v in data.items()}
        source = "fast-reid projects/FastFace/fastface/verification.py"
        json.dump({"source": source, "data": stored, "cases": records}, f)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
