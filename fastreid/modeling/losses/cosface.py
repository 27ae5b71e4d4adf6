"""Pairwise CosFace loss over the batch (upstream ``pairwise_cosface``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .circle import _NEG_INF, pair_masks

__all__ = ["pairwise_cosface"]


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
