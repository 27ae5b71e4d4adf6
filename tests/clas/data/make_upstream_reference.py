"""Writes upstream_clas_metrics.json by running upstream FastReID's own classification evaluator
(JDAI-CV/fast-reid, ``fastreid/evaluation/clas_evaluator.py``: ``ClasEvaluator`` reset / process /
evaluate, and its ``accuracy(output, target, topk)``) on generated logits and labels.

    python make_upstream_reference.py /path/to/fast-reid upstream_clas_metrics.json

Only that file of upstream is loaded (its two ``fastreid`` imports, the evaluator base class and
``comm``, are stand-ins: one process). Logits are distinct integers per row divided by 8 (no ties,
so every top-k is the same on any machine; stored as the integers), split into batches of uneven
sizes as a loader gives them. Upstream's evaluator reports ``Acc@1`` and ``metric``; ``Acc@5`` is
upstream's ``accuracy(..., topk=(1, 5))`` on the whole set (its evaluator does not report it).
Not run by the test suite (it needs upstream's code); the JSON it wrote is stored next to it.
"""

import importlib.util
import json
import os
import sys
import types

import numpy as np
import torch


def load_upstream(upstream: str):
    for name in ("fastreid", "fastreid.evaluation", "fastreid.utils"):
        sys.modules.setdefault(name, types.ModuleType(name))
    evaluator = types.ModuleType("fastreid.evaluation.evaluator")
    evaluator.DatasetEvaluator = type("DatasetEvaluator", (), {})
    sys.modules["fastreid.evaluation.evaluator"] = evaluator
    comm = types.ModuleType("fastreid.utils.comm")
    comm.get_world_size = lambda: 1
    sys.modules["fastreid.utils.comm"] = comm
    sys.modules["fastreid.utils"].comm = comm
    sys.modules["fastreid.evaluation"].__path__ = []  # a package, for the relative import
    path = os.path.join(upstream, "fastreid", "evaluation", "clas_evaluator.py")
    spec = importlib.util.spec_from_file_location("fastreid.evaluation.clas_evaluator", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cases() -> list[dict]:
    rng = np.random.default_rng(20261126)
    out = []
    # (name, samples, classes, batch sizes, how informative the logits are)
    plans = [
        ("two_classes", 37, 2, [16, 16, 5], 0.6),
        ("ten_classes", 48, 10, [16, 16, 16], 0.7),
        ("uneven_batches", 50, 7, [1, 20, 29], 0.8),
        ("many_classes_weak", 24, 20, [24], 0.3),
        ("six_classes_chance", 45, 6, [7, 7, 7, 7, 7, 7, 3], 0.0),
    ]
    for name, n, c, batches, signal in plans:
        labels = rng.integers(0, c, n)
        ints = np.stack([rng.permutation(4 * c)[:c] for _ in range(n)]).astype(np.int64)
        # informative: with probability ``signal`` raise the label's logit by a random amount,
        # a multiple of 4 * c so that the row stays free of ties
        boost = (rng.random(n) < signal) * rng.integers(0, 3, n) * (4 * c)
        ints[np.arange(n), labels] += boost
        out.append({"name": name, "labels": labels.tolist(), "logits_x8": ints.tolist(), "batches": batches})
    # every prediction right, and every one wrong
    c, n = 8, 20
    labels = rng.integers(0, c, n)
    ints = np.stack([rng.permutation(c) for _ in range(n)])
    right = ints.copy()
    right[np.arange(n), labels] = 100
    wrong = ints.copy()
    wrong[np.arange(n), labels] = -100
    out.append(
        {"name": "all_right", "labels": labels.tolist(), "logits_x8": right.tolist(), "batches": [8, 12]}
    )
    out.append({"name": "all_wrong", "labels": labels.tolist(), "logits_x8": wrong.tolist(), "batches": [20]})
    return out


def main(upstream: str, out_path: str) -> None:
    module = load_upstream(upstream)
    records = []
    for case in cases():
        logits = torch.tensor(case["logits_x8"], dtype=torch.float32) / 8
        labels = torch.tensor(case["labels"], dtype=torch.int64)
        evaluator = module.ClasEvaluator(cfg=None)
        evaluator.reset()
        start = 0
        for size in case["batches"]:
            evaluator.process({"targets": labels[start : start + size]}, logits[start : start + size])
            start += size
        assert start == len(labels)
        results = evaluator.evaluate()
        upstream = {k: float(v) for k, v in results.items()}
        if logits.shape[1] > 5:
            _, top5 = module.accuracy(logits, labels, topk=(1, 5))
            upstream["Acc@5"] = float(top5)
        records.append({**case, "upstream": upstream})
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump({"source": "JDAI-CV/fast-reid fastreid/evaluation/clas_evaluator.py", "cases": records}, f)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
