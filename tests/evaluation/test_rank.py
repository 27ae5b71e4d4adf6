"""Fast CMC / mAP / mINP against the classic per-query loop (stable ties), CUHK03 variant."""

import numpy as np
import pytest
import torch

from fastreid.evaluation.rank import evaluate_rank, evaluate_rank_from_features
from fastreid.utils.compute_dist import build_dist


def classic_loop(distmat, q_pids, g_pids, q_camids, g_camids, max_rank=50):
    """The textbook per-query evaluation (upstream's python path) with a stable argsort."""
    num_q, num_g = distmat.shape
    max_rank = min(max_rank, num_g)
    indices = np.argsort(distmat, axis=1, kind="stable")
    matches = (g_pids[indices] == q_pids[:, None]).astype(np.int32)
    all_cmc, all_ap, all_inp = [], [], []
    for q in range(num_q):
        order = indices[q]
        keep = ~((g_pids[order] == q_pids[q]) & (g_camids[order] == q_camids[q]))
        raw = matches[q][keep]
        if not raw.any():
            continue
        cmc = raw.cumsum()
        last = np.max(np.where(raw == 1))
        all_inp.append(cmc[last] / (last + 1.0))
        cmc[cmc > 1] = 1
        all_cmc.append(cmc[:max_rank])
        precision = raw.cumsum() / (np.arange(len(raw)) + 1.0)
        all_ap.append((precision * raw).sum() / raw.sum())
    all_cmc = np.asarray(all_cmc).astype(np.float32).sum(0) / len(all_cmc)
    return all_cmc, np.asarray(all_ap), np.asarray(all_inp)


def random_case(rng, num_q, num_g, num_ids, num_cams, quantise=None, distractors=0):
    q_pids = rng.integers(0, num_ids + 3, num_q)  # some query ids never appear in the gallery
    g_pids = rng.integers(0, num_ids, num_g)
    g_pids[:distractors] = -1
    q_cams = rng.integers(0, num_cams, num_q)
    g_cams = rng.integers(0, num_cams, num_g)
    dist = rng.random((num_q, num_g)).astype(np.float32)
    # make true matches a bit closer so rankings are not uniform noise
    dist -= 0.3 * (g_pids[None, :] == q_pids[:, None])
    if quantise:
        dist = np.round(dist * quantise) / quantise  # many exact ties
    return dist.astype(np.float32), q_pids, g_pids, q_cams, g_cams


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("quantise", [None, 8])
def test_matches_classic_loop(seed, quantise):
    rng = np.random.default_rng(seed)
    case = random_case(rng, 37, 211, 15, 3, quantise=quantise, distractors=10)
    ref = classic_loop(*case, max_rank=50)
    for chunk_rows in (None, 1, 7):
        cmc, ap, inp = evaluate_rank(*case, max_rank=50, chunk_rows=chunk_rows)
        assert cmc.dtype == np.float32 and cmc.shape == (50,)
        np.testing.assert_allclose(cmc, ref[0], atol=1e-6)
        np.testing.assert_allclose(ap, ref[1], atol=1e-6)
        np.testing.assert_allclose(inp, ref[2], atol=1e-6)


def test_negative_zero_infinite_and_nan_distances():
    rng = np.random.default_rng(3)
    dist, q_pids, g_pids, q_cams, g_cams = random_case(rng, 20, 60, 6, 2)
    dist[:, ::7] = -0.0
    dist[:, 1::9] = 0.0
    dist[:, 2::11] = np.inf
    dist[:, 3::13] = -np.inf
    non_match = g_pids[None, :] != q_pids[:, None]
    dist[(rng.random(dist.shape) < 0.05) & non_match] = np.nan
    ref = classic_loop(dist, q_pids, g_pids, q_cams, g_cams)
    got = evaluate_rank(dist, q_pids, g_pids, q_cams, g_cams)
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_nan_on_true_match_is_an_error():
    dist = np.zeros((1, 3), np.float32)
    dist[0, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        evaluate_rank(dist, np.array([1]), np.array([2, 1, 3]), np.array([0]), np.array([1, 1, 1]))


def test_small_gallery_and_no_valid_query():
    dist = np.array([[0.1, 0.2, 0.3]], np.float32)
    cmc, ap, inp = evaluate_rank(dist, np.array([5]), np.array([1, 5, 2]), np.array([0]), np.array([0, 1, 0]))
    np.testing.assert_allclose(cmc, [0, 1, 1])
    np.testing.assert_allclose(ap, [0.5])
    np.testing.assert_allclose(inp, [0.5])
    with pytest.raises(ValueError, match="TEST.KEEP_SAME_CAMERA True"):
        # the only same-pid gallery item is from the query's camera: junk, no valid match
        evaluate_rank(dist, np.array([5]), np.array([1, 5, 2]), np.array([1]), np.array([0, 1, 0]))


def test_shape_errors():
    with pytest.raises(ValueError, match="rows"):
        evaluate_rank(np.zeros((2, 3), np.float32), [1], [1, 2, 3], [0], [1, 1, 1])
    with pytest.raises(TypeError, match="integers"):
        evaluate_rank(np.zeros((1, 3), np.float32), [1.5], [1, 2, 3], [0], [1, 1, 1])


@pytest.mark.parametrize("chunk_rows", [6, None])  # several chunks in one reused buffer; one chunk
@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
def test_from_features_equals_distmat_path(metric, chunk_rows):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 12, (90,), generator=g)
    centers = torch.randn(12, 16, generator=g)
    feats = centers[ids] + 0.8 * torch.randn(90, 16, generator=g)
    cams = torch.randint(0, 4, (90,), generator=g)
    qf, gf = feats[:20], feats[20:]
    dist = build_dist(qf, gf, metric)
    ref = classic_loop(dist, ids[:20].numpy(), ids[20:].numpy(), cams[:20].numpy(), cams[20:].numpy())
    got = evaluate_rank_from_features(
        qf, gf, ids[:20], ids[20:], cams[:20], cams[20:], metric, chunk_rows=chunk_rows
    )
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_cuhk03_single_gallery_shot():
    rng = np.random.default_rng(0)
    dist, q_pids, g_pids, q_cams, g_cams = random_case(rng, 30, 120, 10, 2)
    cmc, m_ap = evaluate_rank(dist, q_pids, g_pids, q_cams, g_cams, max_rank=20, use_metric_cuhk03=True)
    ref = classic_loop(dist, q_pids, g_pids, q_cams, g_cams, max_rank=20)
    assert m_ap == pytest.approx(np.mean(ref[1]), abs=1e-6)  # the full rankings' AP, as upstream
    assert np.all(np.diff(cmc) >= 0) and cmc[-1] == pytest.approx(1.0)
    again = evaluate_rank(dist, q_pids, g_pids, q_cams, g_cams, max_rank=20, use_metric_cuhk03=True)
    np.testing.assert_array_equal(cmc, again[0])


def test_cuhk03_deterministic_when_each_identity_has_one_image():
    # with a single image per gallery identity, the sampling has no choice: CMC equals the classic one
    rng = np.random.default_rng(1)
    g_pids = np.arange(40)
    q_pids = rng.integers(0, 40, 15)
    dist = rng.random((15, 40)).astype(np.float32)
    q_cams, g_cams = np.zeros(15, np.int64), np.ones(40, np.int64)
    cmc, _ = evaluate_rank(dist, q_pids, g_pids, q_cams, g_cams, max_rank=10, use_metric_cuhk03=True)
    np.testing.assert_allclose(cmc, classic_loop(dist, q_pids, g_pids, q_cams, g_cams, 10)[0], atol=1e-6)


def test_cuhk03_sampling_expectation():
    # gallery ranked: own id (a), other id (b), own id (a): a sampled own image is first half the time
    num_q = 400
    dist = np.tile(np.array([[0.1, 0.2, 0.3]], np.float32), (num_q, 1))
    q_pids, g_pids = np.zeros(num_q, np.int64), np.array([0, 1, 0])
    q_cams, g_cams = np.zeros(num_q, np.int64), np.ones(3, np.int64)
    cmc, _ = evaluate_rank(dist, q_pids, g_pids, q_cams, g_cams, max_rank=3, use_metric_cuhk03=True)
    assert cmc[0] == pytest.approx(0.5, abs=0.04)
    np.testing.assert_allclose(cmc[1:], [1.0, 1.0])
