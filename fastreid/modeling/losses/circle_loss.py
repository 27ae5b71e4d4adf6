"""Pairwise circle loss (Sun et al., CVPR 2020) and pairwise CosFace over the batch (upstream
``pairwise_circleloss`` and ``pairwise_cosface``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["pairwise_circleloss", "pairwise_cosface", "pair_masks"]

_NEG_INF = -99999999.0  # upstream's mask value; exp() of it is 0


def pair_masks(targets: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(positive pairs without the anchor itself, negative pairs) as 0/1 matrices."""
    same = targets.view(-1, 1).eq(targets.view(1, -1))
    eye = torch.eye(same.size(0), dtype=dtype, device=same.device)
    return same.to(dtype) - eye, (~same).to(dtype)


def pairwise_circleloss(
    embedding: torch.Tensor, targets: torch.Tensor, margin: float, gamma: float
) -> torch.Tensor:
    """``softplus(logsumexp(-gamma a_p (s_p - 1 + m)) + logsumexp(gamma a_n (s_n - m)))`` averaged
    over anchors, with cosine similarities ``s`` and self-paced weights ``a``."""
    embedding = F.normalize(embedding, dim=1)
    sim = torch.matmul(embedding, embedding.t())
    is_pos, is_neg = pair_masks(targets, sim.dtype)
    s_p = sim * is_pos
    s_n = sim * is_neg
    alpha_p = torch.clamp_min(-s_p.detach() + 1 + margin, min=0.0)
    alpha_n = torch.clamp_min(s_n.detach() + margin, min=0.0)
    logit_p = -gamma * alpha_p * (s_p - (1 - margin)) + _NEG_INF * (1 - is_pos)
    logit_n = gamma * alpha_n * (s_n - margin) + _NEG_INF * (1 - is_neg)
    return F.softplus(torch.logsumexp(logit_p, dim=1) + torch.logsumexp(logit_n, dim=1)).mean()


def pairwise_cosface(
    embedding: torch.Tensor, targets: torch.Tensor, margin: float, gamma: float
) -> torch.Tensor:
    """``softplus(logsumexp(-gamma s_p) + logsumexp(gamma (s_n + m)))`` averaged over anchors."""
    embedding = F.normalize(embedding, dim=1)
    sim = torch.matmul(embedding, embedding.t())
    is_pos, is_neg = pair_masks(targets, sim.dtype)
    logit_p = -gamma * (sim * is_pos) + _NEG_INF * (1 - is_pos)
    logit_n = gamma * (sim * is_neg + margin) + _NEG_INF * (1 - is_neg)
    return F.softplus(torch.logsumexp(logit_p, dim=1) + torch.logsumexp(logit_n, dim=1)).mean()
