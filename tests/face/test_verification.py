"""The verification metrics give upstream's numbers: the differential test against results
recorded by running upstream FastFace's own ``verification.evaluate`` / ``calculate_accuracy`` on
generated embeddings (data/make_upstream_reference.py; this test does not need upstream's code),
and TAR@FAR against its definition computed by brute force."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

from fastreid.projects.face import verification as v

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "data"))
from make_upstream_reference import embeddings_of  # noqa: E402

with open(os.path.join(HERE, "data", "upstream_verification.json"), encoding="utf-8") as f:
    REFERENCE = json.load(f)
CASES = REFERENCE["cases"]


def _inputs(case):
    data = REFERENCE["data"][case["data"]]
    return embeddings_of(data["ints"], case["dtype"]), data["same"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_evaluate_equals_upstreams(case):
    emb, same = _inputs(case)
    tpr, fpr, accuracy, best = v.evaluate(emb, same, nrof_folds=case["folds"], pca=case["pca"])
    up = case["upstream"]
    np.testing.assert_allclose(accuracy, up["accuracy"], rtol=0, atol=1e-6)
    np.testing.assert_allclose(best, up["best_thresholds"], rtol=0, atol=1e-6)
    np.testing.assert_allclose(tpr[::10], up["tpr_every_10th"], rtol=0, atol=1e-6)
    np.testing.assert_allclose(fpr[::10], up["fpr_every_10th"], rtol=0, atol=1e-6)
    assert tpr.sum() == pytest.approx(up["tpr_sum"], abs=1e-6)
    assert fpr.sum() == pytest.approx(up["fpr_sum"], abs=1e-6)
    dist = v.pair_distances(emb[0::2], emb[1::2])
    for t, expected in zip((0.5, 1.0, 2.0), up["calculate_accuracy_at_0.5_1_2"]):
        assert v.calculate_accuracy(t, dist, np.array(same)) == pytest.approx(tuple(expected), abs=1e-12)


def test_the_recorded_cases_cover_uneven_folds_pca_and_one_class():
    names = {c["name"] for c in CASES}
    assert {"uneven_folds", "pca4", "no_different_pair", "five_folds", "separable_float32"} <= names
    assert len(REFERENCE["data"]["noisy"]["same"]) % 10 != 0
    assert all(REFERENCE["data"]["all_same"]["same"])


def test_kfold_splits_are_sklearns_contiguous_folds():
    folds = list(v.kfold_splits(23, 10))
    assert [len(test) for _, test in folds] == [3, 3, 3, 2, 2, 2, 2, 2, 2, 2]
    assert np.concatenate([test for _, test in folds]).tolist() == list(range(23))
    for train, test in folds:
        assert sorted(train.tolist() + test.tolist()) == list(range(23))
    with pytest.raises(ValueError, match="at least 10 pairs"):
        list(v.kfold_splits(9, 10))


def _brute_force_val(thresholds, dist, same, far_target, folds):
    """TAR@FAR by its definition: per fold, walk the grid for the FAR curve of the other folds,
    interpolate linearly between the last threshold below the target FAR and the first at or above it."""
    vals, fars = [], []
    for train, test in v.kfold_splits(len(same), folds):
        curve = []
        for t in thresholds:
            p = dist[train] < t
            neg = ~same[train]
            curve.append((t, (p & neg).sum() / neg.sum()))
        if max(f for _, f in curve) < far_target:
            threshold = 0.0
        else:
            below = [(t, f) for t, f in curve if f <= far_target]
            above = [(t, f) for t, f in curve if f > far_target]
            t0, f0 = max(
                below, key=lambda tf: (tf[1], tf[0])
            )  # the largest threshold of the largest FAR <= target
            if f0 == far_target or not above:
                threshold = t0
            else:
                t1, f1 = min(above, key=lambda tf: (tf[1], -tf[0]))
                t1 = max(t for t, f in curve if f == f1)
                threshold = t0 + (far_target - f0) * (t1 - t0) / (f1 - f0)
        p = dist[test] < threshold
        vals.append((p & same[test]).sum() / same[test].sum())
        fars.append((p & ~same[test]).sum() / (~same[test]).sum())
    return float(np.mean(vals)), float(np.std(vals)), float(np.mean(fars))


@pytest.mark.parametrize("far_target", [1e-3, 0.05, 0.2])
def test_tar_at_far_follows_its_definition(far_target):
    case = next(c for c in CASES if c["name"] == "uneven_folds")
    emb, same = _inputs(case)
    same = np.array(same)
    thresholds = np.arange(0, 4, 0.01)
    got = v.calculate_val(thresholds, emb[0::2], emb[1::2], same, far_target, nrof_folds=10)
    dist = v.pair_distances(emb[0::2], emb[1::2])
    expected = _brute_force_val(thresholds, dist, same, far_target, 10)
    assert got == pytest.approx(expected, abs=1e-9)
    assert 0.0 <= got[0] <= 1.0 and 0.0 <= got[2] <= 1.0


def test_threshold_at_far_interpolates_the_increasing_curve():
    thresholds = np.array([0.0, 0.5, 1.0, 1.5, 2.0])
    fars = np.array([0.0, 0.0, 0.1, 0.1, 0.5])
    # FAR 0 up to 0.5, 0.1 up to 1.5: 0.3 lies halfway between (1.5, 0.1) and (2.0, 0.5)
    assert v.threshold_at_far(thresholds, fars, 0.3) == pytest.approx(1.75)
    assert v.threshold_at_far(thresholds, fars, 0.05) == pytest.approx(1.0)
    assert v.threshold_at_far(thresholds, fars, 0.9) == 0.0  # never reached: upstream's fallback


def test_val_far_without_pairs_of_a_kind_is_nan():
    val, far = v.calculate_val_far(1.0, np.array([0.5, 0.7]), np.array([True, True]))
    assert val == 1.0 and np.isnan(far)
