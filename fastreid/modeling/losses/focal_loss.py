"""Focal loss (Lin et al., 2017) on class logits."""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["focal_loss"]


def focal_loss(
    input: torch.Tensor, target: torch.Tensor, alpha: float, gamma: float = 2.0, reduction: str = "mean"
) -> torch.Tensor:
    """``-alpha (1 - p_t)^gamma log(p_t)`` per sample; ``reduction`` "mean", "sum" or "none"."""
    if input.dim() < 2:
        raise ValueError(f"focal_loss expects N x C logits, got shape {tuple(input.shape)}")
    if input.size(0) != target.size(0):
        raise ValueError(f"focal_loss: {input.size(0)} logits rows but {target.size(0)} targets")
    log_p = F.log_softmax(input, dim=1).gather(1, target.unsqueeze(1)).squeeze(1)
    loss = -alpha * torch.pow(1.0 - log_p.exp(), gamma) * log_p
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"focal_loss: unknown reduction {reduction!r}; use 'mean', 'sum' or 'none'")
