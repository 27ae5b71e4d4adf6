"""Cross-entropy with label smoothing (upstream FastReID's ``cross_entropy_loss``) and the
training accuracy it reports (``log_accuracy``)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from fastreid.utils.events import get_event_storage

__all__ = ["cross_entropy_loss", "log_accuracy"]


@torch.no_grad()
def log_accuracy(
    pred_class_logits: torch.Tensor, gt_classes: torch.Tensor, topk: Sequence[int] = (1,)
) -> list[torch.Tensor]:
    """Top-k accuracies of the batch (one 1-element tensor per ``k``); the first is put into the
    trainer's event storage as ``cls_accuracy`` (so this runs inside ``with EventStorage()``)."""
    batch = pred_class_logits.size(0)
    ranked = pred_class_logits.topk(max(topk), dim=1, largest=True, sorted=True).indices.t()
    correct = ranked.eq(gt_classes.view(1, -1).expand_as(ranked))
    accuracies = [correct[:k].reshape(-1).float().sum(dim=0, keepdim=True) / batch for k in topk]
    get_event_storage().put_scalar("cls_accuracy", accuracies[0])
    return accuracies


def cross_entropy_loss(
    pred_class_outputs: torch.Tensor,
    gt_classes: torch.Tensor,
    eps: float,
    alpha: float = 0.2,
) -> torch.Tensor:
    """Cross-entropy against smoothed one-hot targets.

    The target class gets ``1 - eps`` and each of the other ``C - 1`` classes ``eps / (C - 1)``.
    ``eps < 0`` selects adaptive smoothing: ``eps = alpha * p(target)`` per sample (computed
    without gradient, like the targets). The per-sample losses are summed and divided by the
    number of non-zero ones.
    """
    num_classes = pred_class_outputs.size(1)
    if eps >= 0:
        smooth = torch.as_tensor(eps, dtype=pred_class_outputs.dtype, device=pred_class_outputs.device)
    else:
        probs = F.softmax(pred_class_outputs, dim=1)
        smooth = alpha * probs[torch.arange(probs.size(0), device=probs.device), gt_classes].unsqueeze(1)

    log_probs = F.log_softmax(pred_class_outputs, dim=1)
    with torch.no_grad():
        targets = torch.ones_like(log_probs) * (smooth / max(num_classes - 1, 1))
        on_target = (1 - smooth).expand(log_probs.size(0), 1).to(targets.dtype)
        targets.scatter_(1, gt_classes.unsqueeze(1), on_target)

    loss = (-targets * log_probs).sum(dim=1)
    with torch.no_grad():
        non_zero = max(int(torch.count_nonzero(loss)), 1)
    return loss.sum() / non_zero
