"""The weighted binary cross-entropy of attribute recognition (upstream FastAttr's ``bce_loss``;
the weighting is that of Jia et al., "Rethinking of pedestrian attribute recognition", 2020)."""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

__all__ = ["ratio2weight", "cross_entropy_sigmoid_loss"]


def ratio2weight(targets: torch.Tensor, ratio: torch.Tensor) -> torch.Tensor:
    """``exp(1 - ratio)`` where ``targets`` is 1, ``exp(ratio)`` where it is 0: an attribute that is
    rarely on weighs more when it is on, and less when it is off (``ratio``: each attribute's
    positive ratio in the training set). Entries of ``targets`` above 1 get weight 0, as upstream."""
    pos_weights = targets * (1 - ratio)
    neg_weights = (1 - targets) * ratio
    weights = torch.exp(neg_weights + pos_weights)
    weights[targets > 1] = 0.0
    return weights


def cross_entropy_sigmoid_loss(
    pred_class_logits: torch.Tensor, gt_classes: torch.Tensor, sample_weight: Optional[torch.Tensor] = None
) -> torch.Tensor:
    """Binary cross-entropy of N x C logits against N x C labels, each term weighted by
    :func:`ratio2weight` of the labels thresholded at 0.5 when ``sample_weight`` (C positive ratios)
    is given, summed and divided by the number of non-zero terms (at least 1), as upstream."""
    gt_classes = gt_classes.to(pred_class_logits.dtype)
    loss = F.binary_cross_entropy_with_logits(pred_class_logits, gt_classes, reduction="none")
    if sample_weight is not None:
        targets_mask = (gt_classes.detach() > 0.5).to(loss.dtype)
        loss = loss * ratio2weight(targets_mask, sample_weight.to(loss.device, loss.dtype))
    with torch.no_grad():
        non_zero_cnt = max(int(torch.count_nonzero(loss)), 1)
    return loss.sum() / non_zero_cnt
