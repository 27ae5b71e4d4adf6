"""MoCo: Baseline plus a memory queue of past features (He et al., 2020), upstream's ``MoCo``.

The queue (``memory.queue``: D x QUEUE_SIZE normalised features, ``memory.queue_label``,
``memory.queue_ptr``, persistent buffers as upstream has them) adds ``loss_mb``: a pairwise
CosFace loss (margin 0.25, gamma 32) of the batch's features against every queued feature.

Difference from upstream: upstream masks the batch's own just-queued copies at queue columns
``0..N-1`` whatever the queue pointer, so after the first iteration each sample is its own
positive. Here the columns the batch was actually written to are masked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from fastreid.config import CfgNode

from ..losses.circle_loss import _NEG_INF
from ..losses.utils import concat_all_gather
from .baseline import Baseline
from .build import META_ARCH_REGISTRY

__all__ = ["MoCo", "Memory"]


class Memory(nn.Module):
    """A FIFO queue of ``K`` features of dimension ``dim`` and their labels."""

    queue: torch.Tensor  # buffers, registered in __init__
    queue_label: torch.Tensor
    queue_ptr: torch.Tensor

    def __init__(self, dim: int = 512, K: int = 65536, margin: float = 0.25, gamma: float = 32.0) -> None:
        super().__init__()
        self.K = K
        self.margin = margin
        self.gamma = gamma
        self.register_buffer("queue", F.normalize(torch.randn(dim, K), dim=0))
        self.register_buffer("queue_label", torch.zeros((1, K), dtype=torch.long))
        self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

    @torch.no_grad()
    def enqueue(self, keys: torch.Tensor, targets: torch.Tensor) -> int:
        """Write the (all processes') batch at the pointer; returns where it was written."""
        keys, targets = concat_all_gather(keys.detach()), concat_all_gather(targets.detach())
        n = keys.size(0)
        if self.K % n:
            raise ValueError(
                f"MODEL.QUEUE_SIZE ({self.K}) must be a multiple of the batch size across processes ({n})"
            )
        ptr = int(self.queue_ptr)
        self.queue[:, ptr : ptr + n] = keys.t()
        self.queue_label[:, ptr : ptr + n] = targets
        self.queue_ptr[0] = (ptr + n) % self.K
        return ptr

    def forward(self, features: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        features = F.normalize(features, p=2, dim=1)
        ptr = self.enqueue(features, targets)
        sim = torch.matmul(features, self.queue)
        n, m = sim.shape
        labels = self.queue_label.expand(n, m)
        is_pos = targets.view(n, 1).eq(labels).to(sim.dtype)
        is_neg = 1 - is_pos
        own = torch.zeros_like(is_pos)
        own[:, ptr : ptr + n] = torch.eye(n, dtype=sim.dtype, device=sim.device)  # each sample's own copy
        is_pos = is_pos - own
        logit_p = -self.gamma * (sim * is_pos) + _NEG_INF * (1 - is_pos)
        logit_n = self.gamma * (sim * is_neg + self.margin) + _NEG_INF * (1 - is_neg)
        return F.softplus(torch.logsumexp(logit_p, dim=1) + torch.logsumexp(logit_n, dim=1)).mean()


@META_ARCH_REGISTRY.register()
class MoCo(Baseline):
    """Built as upstream's, ``MoCo(cfg)``, or explicitly: Baseline's keyword arguments plus
    ``memory_dim`` and ``queue_size`` (keywords given with a cfg override its values)."""

    def __init__(self, cfg: CfgNode | None = None, **kwargs: Any) -> None:
        if cfg is not None:
            kwargs = {**type(self).from_config(cfg), **kwargs}
        missing = [k for k in ("memory_dim", "queue_size") if k not in kwargs]
        if missing:
            raise TypeError(f"MoCo needs a cfg or the keyword arguments {', '.join(missing)}")
        memory_dim, queue_size = kwargs.pop("memory_dim"), kwargs.pop("queue_size")
        super().__init__(**kwargs)
        self.memory = Memory(memory_dim, queue_size)

    @classmethod
    def from_config(cls, cfg) -> dict:
        kwargs = super().from_config(cfg)
        heads = cfg.MODEL.HEADS
        kwargs["memory_dim"] = heads.EMBEDDING_DIM or cfg.MODEL.BACKBONE.FEAT_DIM
        kwargs["queue_size"] = cfg.MODEL.QUEUE_SIZE
        return kwargs

    def losses(self, outputs: Mapping[str, torch.Tensor], gt_labels: torch.Tensor) -> dict[str, torch.Tensor]:
        loss_dict = super().losses(outputs, gt_labels)
        loss_dict["loss_mb"] = self.memory(outputs["features"], gt_labels)
        return loss_dict
