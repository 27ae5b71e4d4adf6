"""Face verification metrics on pairs of embeddings (upstream FastFace's ``verification.py``,
the LFW protocol of David Sandberg's facenet and InsightFace).

Pairs are rows ``2i`` and ``2i + 1`` of the embeddings; their distance is the squared Euclidean
distance (0..4 for L2-normalised embeddings); a pair is predicted "same" when its distance is
strictly below the threshold.

- **Accuracy** (:func:`calculate_roc`): the pairs are cut into ``nrof_folds`` contiguous folds
  (scikit-learn's ``KFold(shuffle=False)``: the first ``n % k`` folds one pair longer); for each
  fold the threshold of the grid with the best accuracy on the other folds (the first one on a
  tie) is applied to the fold. The mean of the folds' accuracies is the verification accuracy,
  the mean of the folds' thresholds the threshold reported. TPR / FPR at each threshold of the
  grid, averaged over the folds, are the ROC curve.
- **TAR@FAR** (:func:`calculate_val`): for each fold, the threshold at which the other folds'
  false accept rate reaches ``far_target`` (linear interpolation on the grid, see
  :func:`threshold_at_far`), applied to the fold; the mean true accept rate, its standard
  deviation and the mean false accept rate.

:func:`calculate_roc`, :func:`calculate_accuracy` and :func:`evaluate` give upstream's numbers
(tests/face compares them with upstream's own functions on generated embeddings). Upstream's
``calculate_val`` interpolates with ``scipy.interpolate.interp1d(far, thresholds, kind="slinear")``,
which current SciPy refuses whenever two thresholds give the same FAR (always, in practice: FAR
is 0 below the smallest negative distance); here the curve is made strictly increasing first (for
each FAR value its largest threshold), which is what that interpolation meant. Upstream's
``evaluate`` does not call it; :class:`~.face_evaluator.FaceEvaluator` reports it.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "calculate_accuracy",
    "calculate_roc",
    "calculate_val",
    "calculate_val_far",
    "evaluate",
    "kfold_splits",
    "pair_distances",
    "threshold_at_far",
]

#: The threshold grid of the accuracy (upstream's ``np.arange(0, 4, 0.01)``).
ROC_THRESHOLDS = np.arange(0, 4, 0.01)
#: The threshold grid of TAR@FAR (upstream's commented-out ``np.arange(0, 4, 0.001)``).
VAL_THRESHOLDS = np.arange(0, 4, 0.001)


def kfold_splits(n: int, nrof_folds: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``(train, test)`` index arrays of ``nrof_folds`` contiguous folds over ``range(n)``, as
    scikit-learn's ``KFold(n_splits=nrof_folds, shuffle=False)``."""
    if nrof_folds < 2:
        raise ValueError(f"nrof_folds must be at least 2, got {nrof_folds}")
    if n < nrof_folds:
        raise ValueError(
            f"{n} pairs cannot be cut into {nrof_folds} folds; evaluate at least {nrof_folds} pairs"
        )
    indices = np.arange(n)
    sizes = np.full(nrof_folds, n // nrof_folds, dtype=int)
    sizes[: n % nrof_folds] += 1
    start = 0
    for size in sizes:
        test = indices[start : start + size]
        train = np.concatenate([indices[:start], indices[start + size :]])
        yield train, test
        start += size


def pair_distances(embeddings1: np.ndarray, embeddings2: np.ndarray) -> np.ndarray:
    """Squared Euclidean distance of each row pair."""
    diff = np.subtract(embeddings1, embeddings2)
    return np.sum(np.square(diff), 1)


def _rates(thresholds: np.ndarray, dist: np.ndarray, actual_issame: np.ndarray) -> tuple:
    """``tp, fp, tn, fn`` counts at every threshold (arrays over the thresholds)."""
    same = np.asarray(actual_issame, dtype=bool)
    predict = dist[None, :] < np.asarray(thresholds, dtype=np.float64)[:, None]
    tp = np.sum(predict & same, axis=1)
    fp = np.sum(predict & ~same, axis=1)
    tn = np.sum(~predict & ~same, axis=1)
    fn = np.sum(~predict & same, axis=1)
    return tp, fp, tn, fn


def _accuracies(thresholds: np.ndarray, dist: np.ndarray, actual_issame: np.ndarray) -> tuple:
    """TPR, FPR and accuracy at every threshold, each as :func:`calculate_accuracy` computes it."""
    tp, fp, tn, fn = _rates(thresholds, dist, actual_issame)
    with np.errstate(divide="ignore", invalid="ignore"):
        tpr = np.where(tp + fn == 0, 0.0, tp / np.maximum(tp + fn, 1))
        fpr = np.where(fp + tn == 0, 0.0, fp / np.maximum(fp + tn, 1))
    acc = (tp + tn) / dist.size
    return tpr, fpr, acc


def calculate_accuracy(
    threshold: float, dist: np.ndarray, actual_issame: np.ndarray
) -> tuple[float, float, float]:
    """``(tpr, fpr, accuracy)`` of predicting "same" where ``dist < threshold`` (a rate whose
    denominator is 0 is 0)."""
    tpr, fpr, acc = _accuracies(np.array([threshold]), np.asarray(dist), np.asarray(actual_issame))
    return float(tpr[0]), float(fpr[0]), float(acc[0])


def _pca_distances(
    embeddings1: np.ndarray, embeddings2: np.ndarray, train_set: np.ndarray, pca: int
) -> np.ndarray:
    """Distances after a PCA to ``pca`` components fitted on the training pairs' embeddings (both
    sides), each projection L2-normalised, as upstream does with scikit-learn's PCA."""
    fit = np.concatenate((embeddings1[train_set], embeddings2[train_set]), axis=0).astype(np.float64)
    mean = fit.mean(axis=0)
    _, _, vt = np.linalg.svd(fit - mean, full_matrices=False)
    components = vt[:pca]

    def project(x: np.ndarray) -> np.ndarray:
        y = (x - mean) @ components.T
        norms = np.linalg.norm(y, axis=1, keepdims=True)
        return y / np.where(norms == 0, 1.0, norms)

    return pair_distances(project(embeddings1), project(embeddings2))


def calculate_roc(
    thresholds: ArrayLike,
    embeddings1: np.ndarray,
    embeddings2: np.ndarray,
    actual_issame: ArrayLike,
    nrof_folds: int = 10,
    pca: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(tpr, fpr, accuracy, best_thresholds)``: the ROC over ``thresholds`` averaged over the
    folds, and each fold's accuracy at, and value of, the threshold best on the other folds."""
    embeddings1, embeddings2 = np.asarray(embeddings1), np.asarray(embeddings2)
    if embeddings1.shape != embeddings2.shape:
        raise ValueError(
            f"the two sides of the pairs differ in shape: {embeddings1.shape} and {embeddings2.shape}"
        )
    grid = np.asarray(thresholds, dtype=np.float64)
    issame = np.asarray(actual_issame, dtype=bool)
    nrof_pairs = min(len(issame), embeddings1.shape[0])
    tprs = np.zeros((nrof_folds, len(grid)))
    fprs = np.zeros((nrof_folds, len(grid)))
    accuracy = np.zeros(nrof_folds)
    best_thresholds = np.zeros(nrof_folds)
    dist = pair_distances(embeddings1, embeddings2) if pca == 0 else None
    for fold_idx, (train_set, test_set) in enumerate(kfold_splits(nrof_pairs, nrof_folds)):
        fold_dist = _pca_distances(embeddings1, embeddings2, train_set, pca) if pca > 0 else dist
        assert fold_dist is not None
        _, _, acc_train = _accuracies(grid, fold_dist[train_set], issame[train_set])
        best = int(np.argmax(acc_train))
        best_thresholds[fold_idx] = grid[best]
        tprs[fold_idx], fprs[fold_idx], acc_test = _accuracies(grid, fold_dist[test_set], issame[test_set])
        accuracy[fold_idx] = acc_test[best]
    return np.mean(tprs, 0), np.mean(fprs, 0), accuracy, best_thresholds


def calculate_val_far(threshold: float, dist: np.ndarray, actual_issame: np.ndarray) -> tuple[float, float]:
    """``(true accept rate, false accept rate)`` at ``threshold``; a rate without pairs of its
    kind is NaN (upstream divides by zero there)."""
    same = np.asarray(actual_issame, dtype=bool)
    predict = np.asarray(dist) < threshold
    n_same, n_diff = int(same.sum()), int((~same).sum())
    true_accept = int(np.sum(predict & same))
    false_accept = int(np.sum(predict & ~same))
    val = true_accept / n_same if n_same else float("nan")
    far = false_accept / n_diff if n_diff else float("nan")
    return val, far


def threshold_at_far(thresholds: ArrayLike, fars: ArrayLike, far_target: float) -> float:
    """The threshold at which the false accept rate reaches ``far_target``: the points
    ``(far, threshold)`` of the grid, for each FAR value its largest threshold, linearly
    interpolated; 0.0 when no threshold reaches ``far_target`` (upstream's fallback)."""
    grid = np.asarray(thresholds, dtype=np.float64)
    rates = np.asarray(fars, dtype=np.float64)
    if rates.size == 0 or np.max(rates) < far_target:
        return 0.0
    order = np.lexsort((grid, rates))  # by FAR, then threshold
    fars_sorted, thr_sorted = rates[order], grid[order]
    last_of_value = np.append(fars_sorted[1:] != fars_sorted[:-1], True)
    return float(np.interp(far_target, fars_sorted[last_of_value], thr_sorted[last_of_value]))


def calculate_val(
    thresholds: ArrayLike,
    embeddings1: np.ndarray,
    embeddings2: np.ndarray,
    actual_issame: ArrayLike,
    far_target: float,
    nrof_folds: int = 10,
) -> tuple[float, float, float]:
    """``(val_mean, val_std, far_mean)``: TAR@FAR=``far_target`` with the threshold of each fold
    found on the other folds (:func:`threshold_at_far`)."""
    embeddings1, embeddings2 = np.asarray(embeddings1), np.asarray(embeddings2)
    if embeddings1.shape != embeddings2.shape:
        raise ValueError(
            f"the two sides of the pairs differ in shape: {embeddings1.shape} and {embeddings2.shape}"
        )
    grid = np.asarray(thresholds, dtype=np.float64)
    issame = np.asarray(actual_issame, dtype=bool)
    nrof_pairs = min(len(issame), embeddings1.shape[0])
    dist = pair_distances(embeddings1, embeddings2)
    val = np.zeros(nrof_folds)
    far = np.zeros(nrof_folds)
    for fold_idx, (train_set, test_set) in enumerate(kfold_splits(nrof_pairs, nrof_folds)):
        tp, fp, tn, fn = _rates(grid, dist[train_set], issame[train_set])
        n_diff = fp + tn
        far_train = np.where(n_diff == 0, 0.0, fp / np.maximum(n_diff, 1))
        threshold = threshold_at_far(grid, far_train, far_target)
        val[fold_idx], far[fold_idx] = calculate_val_far(threshold, dist[test_set], issame[test_set])
    return float(np.mean(val)), float(np.std(val)), float(np.mean(far))


def evaluate(
    embeddings: np.ndarray, actual_issame: ArrayLike, nrof_folds: int = 10, pca: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Upstream's ``evaluate``: :func:`calculate_roc` of the pairs ``(2i, 2i + 1)`` of
    ``embeddings`` on the grid 0, 0.01, ..., 3.99: ``(tpr, fpr, accuracy, best_thresholds)``."""
    embeddings = np.asarray(embeddings)
    return calculate_roc(
        ROC_THRESHOLDS,
        embeddings[0::2],
        embeddings[1::2],
        np.asarray(actual_issame),
        nrof_folds=nrof_folds,
        pca=pca,
    )
