"""Pairwise distances: computed a gallery block at a time, and chunks computed into one reused buffer,
against the plain formulas."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fastreid.utils.compute_dist import build_dist
from fastreid.utils.pairwise import dist_rows, gallery_scale, iter_dist_chunks, prepare

# |1 - cos| <= 2 and a dot product of unit rows in float32 is exact to a few ulps of 1
ATOL = 8 * float(np.finfo(np.float32).eps)


def plain(a: torch.Tensor, b: torch.Tensor, metric: str) -> torch.Tensor:
    a, b = a.double(), b.double()
    if metric == "cosine":
        return 1 - F.normalize(a, dim=1) @ F.normalize(b, dim=1).t()
    return (a[:, None, :] - b[None, :, :]).pow(2).sum(-1)


@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
@pytest.mark.parametrize(
    "num_q, num_g, block_rows", [(9, 30, 7), (9, 30, 30), (9, 30, 1000), (1, 1, 1), (5, 0, 4), (0, 6, 4)]
)
def test_distances_in_gallery_blocks_equal_the_plain_formula(metric, num_q, num_g, block_rows):
    g = torch.Generator().manual_seed(num_q * 100 + num_g + block_rows)
    q, gal = torch.randn(num_q, 12, generator=g), 3 * torch.randn(num_g, 12, generator=g)
    if num_g > 2:
        gal[2] = 0  # a zero row: F.normalize's eps, cosine distance 1
    a, a_sq = prepare(q, metric)
    got = dist_rows(a, a_sq, gal, gallery_scale(gal, metric), metric, block_rows=block_rows)
    assert got.shape == (num_q, num_g) and got.dtype == torch.float32
    ref = plain(q, gal, metric).numpy()
    # float32 rounding of the terms: ulps of 1 (cosine), or of the largest squared norms (euclidean)
    largest = sum(float(x.pow(2).sum(1).max()) if len(x) else 0.0 for x in (q, gal))
    tol = ATOL if metric == "cosine" else 8 * ATOL * max(1.0, largest)
    np.testing.assert_allclose(got.double().numpy(), ref, rtol=0, atol=tol)


@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
def test_build_dist_matches_one_matrix_product(metric):
    g = torch.Generator().manual_seed(1)
    q, gal = torch.randn(40, 64, generator=g), torch.randn(1500, 64, generator=g)  # several blocks of 512
    if metric == "cosine":
        ref = (1 - F.normalize(q, dim=1) @ F.normalize(gal, dim=1).t()).numpy()
        tol = ATOL
    else:  # the formula upstream's compute_euclidean_distance evaluates
        ref = (q.pow(2).sum(1)[:, None] + gal.pow(2).sum(1)[None, :] - 2 * q @ gal.t()).numpy()
        tol = ATOL * 4 * 64
    np.testing.assert_allclose(build_dist(q, gal, metric), ref, rtol=0, atol=tol)


@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
def test_chunks_in_a_reused_buffer_are_the_chunks(metric):
    g = torch.Generator().manual_seed(2)
    q, gal = torch.randn(23, 8, generator=g), torch.randn(17, 8, generator=g)
    fresh = [(s, e, d.clone()) for s, e, d in iter_dist_chunks(q, gal, metric, chunk_rows=5)]
    pointers = set()
    for (s, e, d), (s2, e2, ref) in zip(
        iter_dist_chunks(q, gal, metric, chunk_rows=5, reuse_buffer=True), fresh
    ):
        assert (s, e) == (s2, e2)
        assert torch.equal(d, ref)  # compared before the next chunk overwrites it
        pointers.add(d.data_ptr())
    assert len(fresh) == 5 and len(pointers) == 1  # one buffer for all chunks
    kept = list(iter_dist_chunks(q, gal, metric, chunk_rows=5))  # by default each chunk is its own
    assert all(torch.equal(d, ref) for (_, _, d), (_, _, ref) in zip(kept, fresh))
