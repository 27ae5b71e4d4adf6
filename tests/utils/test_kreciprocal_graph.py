"""The sparse Jaccard graph (``knn_jaccard_graph``) against the dense ``compute_jaccard_distance``:
every stored entry bit for bit the dense matrix's, exactly the entries within the threshold stored,
rows ordered by distance; whatever the block sizes."""

from __future__ import annotations

import numpy as np
import pytest

from fastreid.utils.compute_dist import compute_jaccard_distance
from fastreid.utils.kreciprocal import knn_jaccard_graph, sparse_jaccard


def clustered_unit_features(
    seed: int, n: int, dim: int = 24, ids: int = 30, noise: float = 0.8
) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(ids, dim))
    x = centres[rng.integers(0, ids, n)] + noise * rng.normal(size=(n, dim))
    x[: n // 20] = x[n // 20 : 2 * (n // 20)]  # exact duplicates: zero distances and ties
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def graph_as_dense_mask(indptr, indices, n):
    rows = np.repeat(np.arange(n), np.diff(indptr))
    mask = np.zeros((n, n), bool)
    mask[rows, indices] = True
    return rows, mask


@pytest.mark.parametrize(
    ("seed", "n", "k1", "k2", "threshold", "block"),
    [
        (0, 200, 20, 6, 0.6, 4_000_000),
        (1, 160, 30, 6, 0.6, 900),
        (2, 120, 10, 1, 0.95, 350),
        (3, 150, 15, 4, 0.3, 1),
    ],
)
def test_graph_holds_the_dense_values_within_the_threshold(seed, n, k1, k2, threshold, block, monkeypatch):
    # small blocks: many blocks of rows, and rows whose pairs alone exceed the budget (block 1);
    # blocks of a few rows by the size of the grouping table
    monkeypatch.setattr(sparse_jaccard, "JACCARD_BLOCK_ELEMS", block)
    monkeypatch.setattr(sparse_jaccard, "GRAPH_TABLE_ELEMS", (1 + 2 * seed) * n)
    x = clustered_unit_features(seed, n)
    dense = compute_jaccard_distance(x, k1=k1, k2=k2)
    # a threshold equal to a value of the matrix: "at most" must keep it
    values = np.unique(dense[(dense > 0) & (dense < threshold)])
    limit = float(values[len(values) // 2])
    indptr, indices, dist = knn_jaccard_graph(x, k1, k2, max_distance=limit)

    rows, stored = graph_as_dense_mask(indptr, indices, n)
    assert dist.dtype == np.float32 and indptr[-1] == len(indices) == len(dist)
    np.testing.assert_array_equal(dist, dense[rows, indices])  # bit for bit
    np.testing.assert_array_equal(stored, dense <= np.float32(limit))
    assert stored[np.arange(n), np.arange(n)].all()  # every image is its own neighbour
    assert (dense[~stored] > np.float32(limit)).all()
    assert ((dense == 0) & ~np.eye(n, dtype=bool)).any()  # the duplicates
    # each row by distance, then column
    np.testing.assert_array_equal(np.lexsort((indices, dist, rows)), np.arange(len(dist)))


def test_graph_of_two_images_and_bad_arguments():
    x = clustered_unit_features(5, 2)
    indptr, indices, dist = knn_jaccard_graph(x, 1, 1, max_distance=0.5)
    dense = compute_jaccard_distance(x, k1=1, k2=1)  # each image's set is itself alone
    assert dense[0, 1] == dense[1, 0] == 1.0
    assert list(indptr) == [0, 1, 2] and list(indices) == [0, 1]
    np.testing.assert_array_equal(dist, [dense[0, 0], dense[1, 1]])
    with pytest.raises(ValueError, match="k1 >= 1"):
        knn_jaccard_graph(x, 0, 1, max_distance=0.5)
    with pytest.raises(ValueError, match="below 1"):
        knn_jaccard_graph(x, 1, 1, max_distance=1.0)
