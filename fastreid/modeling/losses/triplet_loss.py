"""Triplet loss with batch-hard mining or soft (softmax-weighted) mining.

Hermans et al., "In Defense of the Triplet Loss", 2017 (batch hard); the weighted variant is
AGW's weighted regularisation triplet (Ye et al., 2020). Upstream FastReID's values: Euclidean
distances, or with ``norm_feat`` the cosine distance ``2 - 2 cos`` (:func:`.utils.cosine_dist`).
In a multi-process run each process's anchors are compared with every process's samples.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .utils import concat_all_gather, cosine_dist, euclidean_dist, gather_with_grad

__all__ = ["triplet_loss", "softmax_weights", "hard_example_mining", "weighted_example_mining"]


def softmax_weights(dist: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Row-wise softmax of ``dist`` over the positions where ``mask`` is 1 (0 elsewhere; rows
    with no such position are all 0)."""
    mask = mask.to(dist.dtype)
    max_v = torch.max(dist * mask, dim=1, keepdim=True)[0]
    exp = torch.exp(dist - max_v) * mask
    return exp / (exp.sum(dim=1, keepdim=True) + 1e-6)  # 1e-6: anchors without positives/negatives


def hard_example_mining(
    dist_mat: torch.Tensor, is_pos: torch.Tensor, is_neg: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per anchor (row of the N x M ``dist_mat``): the farthest positive and the closest negative
    distance. ``is_pos``/``is_neg`` are N x M masks (bool or 0/1). Anchors may have different
    numbers of positives."""
    if dist_mat.dim() != 2:
        raise ValueError(
            f"hard_example_mining needs an N x M distance matrix, got shape {tuple(dist_mat.shape)}"
        )
    is_pos, is_neg = is_pos.bool(), is_neg.bool()
    dist_ap = torch.where(is_pos, dist_mat, torch.full_like(dist_mat, float("-inf"))).max(dim=1).values
    dist_an = torch.where(is_neg, dist_mat, torch.full_like(dist_mat, float("inf"))).min(dim=1).values
    return dist_ap, dist_an


def weighted_example_mining(
    dist_mat: torch.Tensor, is_pos: torch.Tensor, is_neg: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per anchor: the softmax(d)-weighted mean positive distance and the softmax(-d)-weighted
    mean negative distance."""
    if dist_mat.dim() != 2:
        raise ValueError(
            f"weighted_example_mining needs an N x M distance matrix, got shape {tuple(dist_mat.shape)}"
        )
    is_pos = is_pos.to(dist_mat.dtype)
    is_neg = is_neg.to(dist_mat.dtype)
    dist_ap = dist_mat * is_pos
    dist_an = dist_mat * is_neg
    dist_ap = (dist_ap * softmax_weights(dist_ap, is_pos)).sum(dim=1)
    dist_an = (dist_an * softmax_weights(-dist_an, is_neg)).sum(dim=1)
    return dist_ap, dist_an


def triplet_loss(
    embedding: torch.Tensor,
    targets: torch.Tensor,
    margin: float,
    norm_feat: bool,
    hard_mining: bool,
) -> torch.Tensor:
    """Triplet loss of the batch (anchors of this process against all processes' samples).

    ``margin > 0``: ``mean(max(0, d_ap - d_an + margin))``; ``margin <= 0``: soft margin
    ``mean(log(1 + exp(d_ap - d_an)))`` (falling back to margin 0.3 if that overflows).
    """
    all_embedding = gather_with_grad(embedding)
    all_targets = concat_all_gather(targets)

    distance = cosine_dist if norm_feat else euclidean_dist
    dist_mat = distance(embedding, all_embedding)
    is_pos = targets.view(-1, 1).eq(all_targets.view(1, -1))
    is_neg = ~is_pos

    if hard_mining:
        dist_ap, dist_an = hard_example_mining(dist_mat, is_pos, is_neg)
    else:
        dist_ap, dist_an = weighted_example_mining(dist_mat, is_pos, is_neg)

    y = torch.ones_like(dist_an)
    if margin > 0:
        return F.margin_ranking_loss(dist_an, dist_ap, y, margin=margin)
    loss = F.soft_margin_loss(dist_an - dist_ap, y)
    if torch.isinf(loss):
        loss = F.margin_ranking_loss(dist_an, dist_ap, y, margin=0.3)
    return loss
