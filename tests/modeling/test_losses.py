"""Losses against hand-computed values and naive per-anchor reference implementations."""

import math

import pytest
import torch
import torch.nn.functional as F

from fastreid.layers import ArcSoftmax, CircleSoftmax, CosSoftmax, Linear
from fastreid.modeling.losses import (
    cross_entropy_loss,
    focal_loss,
    pairwise_circleloss,
    pairwise_cosface,
    triplet_loss,
)


def test_cross_entropy_label_smoothing_by_hand():
    logits = torch.tensor([[2.0, 0.0, 0.0]], dtype=torch.float64)
    z = math.exp(2) + 2
    lp = [2 - math.log(z), -math.log(z), -math.log(z)]
    # eps = 0.1 over 3 classes: 0.9 on the target, 0.05 on each other class
    expected = -(0.9 * lp[0] + 0.05 * lp[1] + 0.05 * lp[2])
    got = cross_entropy_loss(logits, torch.tensor([0]), eps=0.1)
    assert got.item() == pytest.approx(expected, rel=1e-12)
    # no smoothing: plain cross-entropy
    got = cross_entropy_loss(logits, torch.tensor([1]), eps=0.0)
    assert got.item() == pytest.approx(-lp[1], rel=1e-12)


def test_cross_entropy_divides_by_non_zero_samples():
    # the first sample's loss underflows to exactly 0: upstream averages over the others only
    logits = torch.tensor([[200.0, 0.0], [0.0, 1.0]])
    targets = torch.tensor([0, 0])
    second = -F.log_softmax(logits[1:], dim=1)[0, 0]
    assert cross_entropy_loss(logits, targets, eps=0.0).item() == pytest.approx(second.item())


def test_cross_entropy_adaptive_smoothing():
    logits = torch.tensor([[1.0, 0.5, -1.0, 0.0]], dtype=torch.float64)
    p = F.softmax(logits, dim=1)[0]
    lp = F.log_softmax(logits, dim=1)[0]
    eps = 0.2 * p[2]
    expected = -((1 - eps) * lp[2] + eps / 3 * (lp[0] + lp[1] + lp[3]))
    got = cross_entropy_loss(logits, torch.tensor([2]), eps=-1, alpha=0.2)
    assert got.item() == pytest.approx(expected.item(), rel=1e-12)


# Four 1-D points: ids 0, 0, 1, 1 at 0, 2, 3, 6.
POINTS = torch.tensor([[0.0], [2.0], [3.0], [6.0]], dtype=torch.float64)
IDS = torch.tensor([0, 0, 1, 1])


def test_triplet_hard_mining_known_answer():
    # hardest positive / closest negative per anchor: (2, 3), (2, 1), (3, 1), (3, 4)
    # margin 1.5 -> 0.5, 2.5, 3.5, 0.5 -> mean 1.75
    loss = triplet_loss(POINTS, IDS, margin=1.5, norm_feat=False, hard_mining=True)
    assert loss.item() == pytest.approx(1.75, abs=1e-5)


def test_triplet_soft_margin_known_answer():
    d = torch.tensor([2 - 3, 2 - 1, 3 - 1, 3 - 4], dtype=torch.float64)
    expected = torch.log1p(torch.exp(d)).mean()
    loss = triplet_loss(POINTS, IDS, margin=0.0, norm_feat=False, hard_mining=True)
    assert loss.item() == pytest.approx(expected.item(), abs=1e-5)


def test_triplet_hard_mining_with_unequal_positive_counts():
    x = torch.tensor([[0.0], [1.0], [5.0], [4.0], [7.0]], dtype=torch.float64)
    ids = torch.tensor([0, 0, 1, 1, 1])
    # (ap, an): (1, 4), (1, 3), (2, 4), (3, 3), (3, 6) with margin 0.5
    terms = [max(0.0, ap - an + 0.5) for ap, an in [(1, 4), (1, 3), (2, 4), (3, 3), (3, 6)]]
    loss = triplet_loss(x, ids, margin=0.5, norm_feat=False, hard_mining=True)
    assert loss.item() == pytest.approx(sum(terms) / len(terms), abs=1e-5)


def test_triplet_weighted_mining_matches_reference():
    torch.manual_seed(0)
    x = torch.randn(6, 5, dtype=torch.float64)
    ids = torch.tensor([0, 0, 1, 1, 2, 2])
    dist = torch.cdist(x, x)
    terms = []
    for i in range(6):
        pos = [j for j in range(6) if ids[j] == ids[i]]  # upstream counts the anchor itself
        neg = [j for j in range(6) if ids[j] != ids[i]]
        w_p = torch.softmax(dist[i, pos], 0)
        w_n = torch.softmax(-dist[i, neg], 0)
        ap = (w_p * dist[i, pos]).sum()
        an = (w_n * dist[i, neg]).sum()
        terms.append(torch.log1p(torch.exp(ap - an)))
    expected = torch.stack(terms).mean()
    loss = triplet_loss(x, ids, margin=0.0, norm_feat=False, hard_mining=False)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)


def test_triplet_norm_feat_ignores_feature_scale():
    torch.manual_seed(1)
    x = torch.randn(4, 8)
    a = triplet_loss(x, IDS, 0.3, norm_feat=True, hard_mining=True)
    b = triplet_loss(x * 7.0, IDS, 0.3, norm_feat=True, hard_mining=True)
    assert a.item() == pytest.approx(b.item(), rel=1e-5)
    assert a.item() != pytest.approx(triplet_loss(x * 7.0, IDS, 0.3, False, True).item())


def _pairwise_reference(x, ids, logit_pos, logit_neg):
    x = F.normalize(x, dim=1)
    sim = x @ x.t()
    terms = []
    for i in range(len(ids)):
        pos = torch.stack([logit_pos(sim[i, j]) for j in range(len(ids)) if j != i and ids[j] == ids[i]])
        neg = torch.stack([logit_neg(sim[i, j]) for j in range(len(ids)) if ids[j] != ids[i]])
        terms.append(F.softplus(torch.logsumexp(pos, 0) + torch.logsumexp(neg, 0)))
    return torch.stack(terms).mean()


def test_pairwise_cosface_matches_reference():
    torch.manual_seed(2)
    x = torch.randn(6, 4, dtype=torch.float64)
    ids = torch.tensor([0, 0, 1, 1, 2, 2])
    m, g = 0.25, 8.0
    expected = _pairwise_reference(x, ids, lambda s: -g * s, lambda s: g * (s + m))
    assert pairwise_cosface(x, ids, m, g).item() == pytest.approx(expected.item(), rel=1e-9)


def test_pairwise_circle_matches_reference():
    torch.manual_seed(3)
    x = torch.randn(6, 4, dtype=torch.float64)
    ids = torch.tensor([0, 0, 0, 1, 1, 1])
    m, g = 0.25, 16.0

    def pos(s):
        return -g * torch.clamp_min(1 + m - s, 0) * (s - (1 - m))

    def neg(s):
        return g * torch.clamp_min(s + m, 0) * (s - m)

    expected = _pairwise_reference(x, ids, pos, neg)
    assert pairwise_circleloss(x, ids, m, g).item() == pytest.approx(expected.item(), rel=1e-9)


def test_focal_loss_by_hand():
    logits = torch.tensor([[1.0, 0.0], [0.0, 3.0]], dtype=torch.float64)
    p = F.softmax(logits, dim=1)
    terms = [-0.25 * (1 - p[0, 0]) ** 2 * torch.log(p[0, 0]), -0.25 * (1 - p[1, 0]) ** 2 * torch.log(p[1, 0])]
    got = focal_loss(logits, torch.tensor([0, 0]), alpha=0.25, gamma=2)
    assert got.item() == pytest.approx(torch.stack(terms).mean().item(), rel=1e-12)
    with pytest.raises(ValueError, match="reduction"):
        focal_loss(logits, torch.tensor([0, 0]), 0.25, 2, reduction="avg")


def test_any_softmax_layers():
    cos = torch.tensor([[0.5, 0.2], [0.1, -0.3]], dtype=torch.float64)
    t = torch.tensor([0, 1])
    assert torch.equal(Linear(2, 30, 0.3)(cos, t), cos * 30)  # upstream's Linear scales too
    out = CosSoftmax(2, 10, 0.3)(cos, t)
    assert torch.allclose(out, torch.tensor([[2.0, 2.0], [1.0, -6.0]], dtype=torch.float64))
    out = ArcSoftmax(2, 10, 0.3)(cos, t)
    assert out[0, 0].item() == pytest.approx(10 * math.cos(math.acos(0.5) + 0.3))
    assert out[0, 1].item() == pytest.approx(2.0)
    out = CircleSoftmax(2, 10, 0.25)(cos, t)
    # target: s * (1 + m - c) * (c - (1 - m)); other: s * (c + m) * (c - m)
    assert out[0, 0].item() == pytest.approx(10 * (1.25 - 0.5) * (0.5 - 0.75))
    assert out[0, 1].item() == pytest.approx(10 * (0.2 + 0.25) * (0.2 - 0.25))


def test_log_accuracy_puts_top1_accuracy_in_the_storage():
    from fastreid.modeling.losses import log_accuracy
    from fastreid.utils.events import EventStorage

    logits = torch.tensor([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7], [0.6, 0.4]])
    with EventStorage(0) as storage:
        log_accuracy(logits, torch.tensor([1, 0, 0, 0]))
        assert storage.latest()["cls_accuracy"][0] == pytest.approx(0.75)


def test_softmax_weights_are_a_masked_softmax():
    from fastreid.modeling.losses.triplet_loss import softmax_weights

    dist = torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0, 0.0]], dtype=torch.float64)
    w = softmax_weights(dist, mask)
    expected = torch.softmax(torch.tensor([1.0, 2.0], dtype=torch.float64), 0)
    torch.testing.assert_close(w[0, :2], expected, rtol=1e-5, atol=1e-6)
    assert w[0, 2] == 0
