"""Pairwise distances: the cosine distances computed a gallery block at a time, and chunks computed into
one reused buffer, against the plain formulas."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fastreid.utils.compute_dist import build_dist
from fastreid.utils.pairwise import cosine_dist, iter_dist_chunks

# |1 - cos| <= 2 and a dot product of unit rows in float32 is exact to a few ulps of 1
ATOL = 8 * float(np.finfo(np.float32).eps)


def plain_cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return 1 - F.normalize(a.double(), dim=1) @ F.normalize(b.double(), dim=1).t()


@pytest.mark.parametrize(
    "num_q, num_g, block_rows", [(9, 30, 7), (9, 30, 30), (9, 30, 1000), (1, 1, 1), (5, 0, 4), (0, 6, 4)]
)
def test_cosine_dist_in_gallery_blocks_equals_the_plain_formula(num_q, num_g, block_rows):
    g = torch.Generator().manual_seed(num_q * 100 + num_g + block_rows)
    q, gal = torch.randn(num_q, 12, generator=g), 3 * torch.randn(num_g, 12, generator=g)
    if num_g > 2:
        gal[2] = 0  # a zero row: F.normalize's eps, distance 1
    got = cosine_dist(F.normalize(q, dim=1), gal, block_rows=block_rows)
    assert got.shape == (num_q, num_g) and got.dtype == torch.float32
    np.testing.assert_allclose(got.double().numpy(), plain_cosine(q, gal).numpy(), rtol=0, atol=ATOL)


def test_build_dist_cosine_matches_one_normalised_matrix_product():
    g = torch.Generator().manual_seed(1)
    q, gal = torch.randn(40, 64, generator=g), torch.randn(1500, 64, generator=g)  # several blocks of 512
    ref = (1 - F.normalize(q, dim=1) @ F.normalize(gal, dim=1).t()).numpy()
    np.testing.assert_allclose(build_dist(q, gal, "cosine"), ref, rtol=0, atol=ATOL)


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
