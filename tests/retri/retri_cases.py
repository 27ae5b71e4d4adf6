"""The features and labels of the evaluator's differential cases, made by a 64-bit linear
congruential generator in Python integers and float64 arithmetic: the same numbers on any machine
and numpy version, so data/upstream_retri_metrics.json stores only the results upstream's code
(and pytorch-metric-learning, for mAP@R) gave on them (data/make_upstream_reference.py)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

#: name -> how the case is drawn: classes and images per class (an int, or a cycle of counts), the
#: feature dim, the spread of the noise around each class centre, the K of Recall@K, cosine or
#: Euclidean, and (In-Shop) how the images split into query and gallery.
CASES: dict[str, dict] = {
    "cub": {"classes": 30, "per_class": 6, "dim": 16, "noise": 0.9, "ks": [1, 2, 4, 8, 16, 32], "cosine": True},
    "cub_euclidean": {
        "classes": 30, "per_class": 6, "dim": 16, "noise": 0.9, "ks": [1, 2, 4, 8, 16, 32], "cosine": False,
    },
    "cars_one_image_classes": {
        "classes": 24, "per_class": [1, 5, 3, 7], "dim": 12, "noise": 1.1, "ks": [1, 2, 4, 8], "cosine": True,
    },
    "sop": {"classes": 330, "per_class": [2, 3, 4, 5], "dim": 16, "noise": 0.8, "ks": [1, 10, 100, 1000], "cosine": True,
        "seed": 9,  # seeds 7 and 8 put two similarities within 1e-5 of each other where it matters
    },
    "inshop": {
        "classes": 40, "per_class": [5, 4, 6], "dim": 16, "noise": 0.9, "ks": [1, 10, 20, 30, 40, 50], "cosine": True,
        "query_per_class": 2, "classes_without_gallery": 3, "gallery_only_classes": 6,
    },
}  # fmt: skip


def lcg(seed: int) -> Iterator[float]:
    """Uniform floats in [0, 1) from Knuth's MMIX LCG (53 high bits)."""
    x = seed
    while True:
        x = (6364136223846793005 * x + 1442695040888963407) % (1 << 64)
        yield (x >> 11) / float(1 << 53)


def draw(name: str, seed: int | None = None) -> dict:
    """``{"features": float32 array, "labels": int array}`` of a self-search case, or with
    ``query_features``/``query_labels``/``gallery_features``/``gallery_labels`` for In-Shop."""
    spec = CASES[name]
    seed = spec.get("seed", 7) if seed is None else seed
    u = lcg(seed + sum(map(ord, name)))
    counts = spec["per_class"]
    counts = (
        [counts] * spec["classes"]
        if isinstance(counts, int)
        else [counts[c % len(counts)] for c in range(spec["classes"])]
    )
    dim, noise = spec["dim"], spec["noise"]
    rows, labels = [], []
    for c, count in enumerate(counts):
        centre = [2 * next(u) - 1 for _ in range(dim)]
        for _ in range(count):
            rows.append([centre[d] + noise * (2 * next(u) - 1) for d in range(dim)])
            labels.append(100 + c)
    features = np.array(rows, dtype=np.float64).astype(np.float32)
    labels_arr = np.array(labels, dtype=np.int64)
    if "query_per_class" not in spec:
        return {"features": features, "labels": labels_arr}
    query, gallery = [], []
    seen: dict[int, int] = {}
    n_classes = spec["classes"]
    for i, label in enumerate(labels):
        c = label - 100
        if c >= n_classes - spec["gallery_only_classes"]:
            gallery.append(i)
        elif c < spec["classes_without_gallery"]:
            query.append(i)
        elif seen.get(c, 0) < spec["query_per_class"]:
            query.append(i)
            seen[c] = seen.get(c, 0) + 1
        else:
            gallery.append(i)
    return {
        "query_features": features[query],
        "query_labels": labels_arr[query],
        "gallery_features": features[gallery],
        "gallery_labels": labels_arr[gallery],
    }
