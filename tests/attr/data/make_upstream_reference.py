"""Writes upstream_attr_metrics.json by running upstream FastReID's own attribute metrics
(JDAI-CV/fast-reid, ``projects/FastAttr/fastattr/attr_evaluation.py``:
``AttrEvaluator.get_attr_metrics(gt_labels, pred_logits, thres)``) on recorded arrays.

    python make_upstream_reference.py /path/to/fast-reid upstream_attr_metrics.json

Only that file of upstream is loaded (its two ``fastreid`` imports, the evaluator base class and
``comm``, are stand-ins: the static method uses numpy alone). The arrays come from a fixed numpy
seed and cover the edge cases: an attribute with no positives, one with no negatives, an image
with no positive label (predicted nothing, or everything), scores exactly at the threshold, label
values above 1 (Market-1501's age), and two thresholds; each case is run on float32 inputs (what
the evaluator gets from torch) and on float64 inputs. Not run by the test suite (it needs
upstream's code); the JSON it wrote is stored next to it.
"""

import importlib.util
import json
import os
import sys
import types

import numpy as np


def load_upstream(upstream: str):
    for name in ("fastreid", "fastreid.evaluation", "fastreid.utils"):
        sys.modules.setdefault(name, types.ModuleType(name))
    evaluator = types.ModuleType("fastreid.evaluation.evaluator")
    evaluator.DatasetEvaluator = type("DatasetEvaluator", (), {})
    sys.modules["fastreid.evaluation.evaluator"] = evaluator
    sys.modules["fastreid.utils.comm"] = types.ModuleType("fastreid.utils.comm")
    sys.modules["fastreid.utils"].comm = sys.modules["fastreid.utils.comm"]
    path = os.path.join(upstream, "projects", "FastAttr", "fastattr", "attr_evaluation.py")
    spec = importlib.util.spec_from_file_location("upstream_attr_evaluation", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.AttrEvaluator.get_attr_metrics


def cases() -> list[dict]:
    rng = np.random.default_rng(20240611)
    out = []

    # a plain draw: 40 images, 8 attributes with different positive ratios, informative scores
    n, c = 40, 8
    gt = (rng.random((n, c)) < np.linspace(0.1, 0.8, c)).astype(np.float32)
    scores = 1 / (1 + np.exp(-(2.5 * (gt - 0.5) + rng.normal(0, 1.2, (n, c)))))
    out.append({"name": "random", "gt": gt, "scores": scores, "thres": 0.5})
    out.append({"name": "random_thres_0.7", "gt": gt, "scores": scores, "thres": 0.7})

    # edge cases: attribute 0 never on, attribute 1 on but in images 0 and 1, which have no
    # positive label (image 0 predicted nothing, image 1 everything), scores at 0.5
    n, c = 12, 6
    gt = (rng.random((n, c)) < 0.4).astype(np.float32)
    gt[:, 0] = 0
    gt[:, 1] = 1
    gt[0] = 0
    gt[1] = 0
    scores = np.clip(0.5 * gt + rng.uniform(0, 0.6, (n, c)), 0, 1)
    scores[0] = 0.1
    scores[1] = 0.9
    scores[2, :] = 0.5  # exactly at the threshold: predicted on
    scores[3, 2] = np.nextafter(np.float32(0.5), np.float32(0))  # just below
    out.append({"name": "edge_cases", "gt": gt, "scores": scores, "thres": 0.5})

    # attribute 0 always on (no negatives), attribute 2 never predicted
    n, c = 10, 3
    gt = (rng.random((n, c)) < 0.5).astype(np.float32)
    gt[:, 0] = 1
    scores = rng.random((n, c))
    scores[:, 2] = 0.0
    out.append({"name": "no_negatives", "gt": gt, "scores": scores, "thres": 0.5})

    # labels above 1 (Market-1501's age 0..3 after upstream's "value - 1")
    n, c = 16, 4
    gt = (rng.random((n, c)) < 0.5).astype(np.float32)
    gt[:, 0] = rng.integers(0, 4, n)
    scores = rng.random((n, c))
    out.append({"name": "labels_above_one", "gt": gt, "scores": scores, "thres": 0.5})

    # nothing on anywhere, nothing predicted
    out.append({"name": "all_negative", "gt": np.zeros((3, 5)), "scores": np.full((3, 5), 0.2), "thres": 0.5})
    return out


def main() -> None:
    upstream, target = sys.argv[1], sys.argv[2]
    get_attr_metrics = load_upstream(upstream)
    records = []
    for case in cases():
        for dtype in (np.float32, np.float64):
            gt = np.asarray(case["gt"], dtype=dtype)
            scores = np.asarray(case["scores"], dtype=dtype)
            results = get_attr_metrics(gt.copy(), scores.copy(), case["thres"])
            records.append(
                {
                    "name": case["name"],
                    "dtype": np.dtype(dtype).name,
                    "thres": case["thres"],
                    "gt": gt.tolist(),
                    "scores": scores.tolist(),
                    "upstream": {k: float(v) for k, v in results.items()},
                }
            )
    with open(target, "w", encoding="utf-8") as f:
        json.dump(
            {"source": "JDAI-CV/fast-reid projects/FastAttr/fastattr/attr_evaluation.py", "cases": records}, f
        )
        f.write("\n")


if __name__ == "__main__":
    main()
