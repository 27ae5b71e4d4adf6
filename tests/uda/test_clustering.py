"""The pseudo-label step: DBSCAN on the sparse graph gives the partition DBSCAN gives on the dense
matrix; the measures of the labels; the checks that stop a clustering that cannot train."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fastreid.projects.uda import (
    ClusteringError,
    PseudoLabels,
    check_clustering,
    check_target_size,
    cluster_centroids,
    dbscan_labels,
    jaccard_graph_matrix,
    label_quality,
    pseudo_labels,
)
from fastreid.utils.compute_dist import compute_jaccard_distance


def clustered(seed: int, n: int, ids: int, noise: float, dim: int = 32) -> tuple[torch.Tensor, np.ndarray]:
    rng = np.random.default_rng(seed)
    pids = rng.integers(0, ids, n)
    x = rng.normal(size=(ids, dim))[pids] + noise * rng.normal(size=(n, dim))
    x[:4] = x[4:8]  # duplicates: distance 0 between two images
    x[-10:] = 3 * rng.normal(size=(10, dim))  # loners: outliers
    pids[-10:] = ids + np.arange(10)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return torch.from_numpy(x.astype(np.float32)), pids


@pytest.mark.parametrize(
    ("seed", "n", "ids", "noise", "k1", "k2", "eps", "min_samples"),
    [
        (0, 300, 20, 0.8, 30, 6, 0.6, 4),
        (1, 400, 40, 1.0, 20, 6, 0.5, 3),
        (2, 250, 10, 1.3, 15, 4, 0.7, 5),
    ],
)
def test_sparse_dbscan_is_dense_dbscan(seed, n, ids, noise, k1, k2, eps, min_samples):
    feats, _ = clustered(seed, n, ids, noise)
    dense = compute_jaccard_distance(feats, k1=k1, k2=k2)
    want = dbscan_labels(dense, eps, min_samples)
    graph = jaccard_graph_matrix(feats, k1, k2, eps)
    assert graph.nnz < n * n / 4  # sparse indeed
    got = dbscan_labels(graph, eps, min_samples)
    np.testing.assert_array_equal(got, want)
    assert want.max() >= 2 and (want < 0).any(), "a partition with clusters and outliers"
    result = pseudo_labels(feats, k1=k1, k2=k2, eps=eps, min_samples=min_samples)
    np.testing.assert_array_equal(result.labels, want)


def test_label_quality_by_hand():
    identities = ["a", "a", "a", "b", "b", "c"]
    perfect = label_quality(np.array([0, 0, 0, 1, 1, 2]), identities)
    assert perfect == pytest.approx({"NMI": 1.0, "ARI": 1.0, "pair_precision": 1.0, "pair_recall": 1.0})
    # one cluster {a, a, b}, a lone a as an outlier; 4 same-identity pairs (3 of a, 1 of b)
    q = label_quality(np.array([0, 0, -1, 0, 1, -1]), identities)
    assert q["pair_precision"] == pytest.approx(1 / 3)  # pairs in cluster 0: aa, ab, ab
    assert q["pair_recall"] == pytest.approx(1 / 4)
    assert 0 < q["NMI"] < 1 and q["ARI"] < 1
    everything_apart = label_quality(np.full(6, -1), identities)
    assert everything_apart["pair_precision"] == 0.0 and everything_apart["pair_recall"] == 0.0
    with pytest.raises(ValueError, match="5 pseudo labels for 6 identities"):
        label_quality(np.zeros(5, np.int64), identities)


def test_pseudo_labels_measure_but_never_use_the_identities():
    feats, pids = clustered(3, 200, 12, 0.8)
    blind = pseudo_labels(feats, k1=20, k2=6, eps=0.6, min_samples=4)
    measured = pseudo_labels(feats, k1=20, k2=6, eps=0.6, min_samples=4, identities=pids)
    scrambled = pseudo_labels(
        feats, k1=20, k2=6, eps=0.6, min_samples=4, identities=np.random.permutation(pids)
    )
    np.testing.assert_array_equal(measured.labels, blind.labels)
    np.testing.assert_array_equal(scrambled.labels, blind.labels)
    assert not blind.quality and measured.quality["pair_precision"] > scrambled.quality["pair_precision"]
    assert set(measured.scalars()) == {
        "clusters", "outlier_share", "largest_cluster_share", "NMI", "ARI", "pair_precision", "pair_recall",
    }  # fmt: skip


def test_centroids_are_the_cluster_means():
    feats = torch.tensor([[1.0, 0.0], [0.0, 1.0], [3.0, 3.0], [2.0, 0.0]])
    got = cluster_centroids(feats, np.array([1, 0, -1, 1]), 2)
    np.testing.assert_allclose(got.numpy(), [[0.0, 1.0], [1.5, 0.0]])


def result_of(labels) -> PseudoLabels:
    labels = np.asarray(labels)
    return PseudoLabels(labels=labels, num_clusters=int(labels.max()) + 1)


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        ([-1] * 10, "left every image an outlier: raise UDA.CLUSTER.EPS"),
        ([0] * 6 + [1, 2, 3, -1], "put 60% of them in one cluster"),
        ([0, 0, 1, 1, 2, 2, -1, -1, -1, -1], "found 3 cluster\\(s\\), fewer than the 4 identities"),
    ],
)
def test_a_clustering_that_cannot_train_is_one_line_naming_eps(labels, message):
    with pytest.raises(ClusteringError, match=message) as info:
        check_clustering(result_of(labels), eps=0.6, min_samples=4, identities_per_batch=4, epoch=2)
    text = str(info.value)
    assert "UDA.CLUSTER.EPS 0.6" in text and "epoch 3" in text and "\n" not in text


def test_enough_clusters_pass_and_a_tiny_target_is_refused():
    check_clustering(
        result_of([0, 0, 1, 1, 2, 2, 3, 3, -1]), eps=0.6, min_samples=2, identities_per_batch=4, epoch=0
    )
    with pytest.raises(
        ClusteringError, match="The target has 20 images, too few to cluster with UDA.CLUSTER.K1 30"
    ):
        check_target_size(20, k1=30, eps=0.6, min_samples=4)
    check_target_size(31, k1=30, eps=0.6, min_samples=4)
