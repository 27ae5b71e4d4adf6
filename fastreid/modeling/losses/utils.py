"""Distances and cross-process gathering shared by the metric losses."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from fastreid.layers.gather_layer import GatherLayer

__all__ = ["normalize", "euclidean_dist", "cosine_dist", "gather_with_grad", "concat_all_gather"]


def normalize(x: torch.Tensor, axis: int = -1) -> torch.Tensor:
    """Unit L2 norm along ``axis`` (``x / (||x|| + 1e-12)``)."""
    return x / (torch.norm(x, 2, axis, keepdim=True).expand_as(x) + 1e-12)


def euclidean_dist(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Pairwise Euclidean distances, M x N, via ``|x|^2 + |y|^2 - 2 x.y`` clamped at 1e-12."""
    xx = x.pow(2).sum(1, keepdim=True)
    yy = y.pow(2).sum(1, keepdim=True).t()
    dist_sq = xx + yy - 2 * torch.matmul(x, y.t())
    return dist_sq.clamp(min=1e-12).sqrt()


def cosine_dist(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Pairwise ``2 - 2 cos(x_i, y_j)``: the squared Euclidean distance of the unit vectors."""
    x = F.normalize(x, dim=1)
    y = F.normalize(y, dim=1)
    return 2 - 2 * torch.mm(x, y.t())


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def concat_all_gather(tensor: torch.Tensor) -> torch.Tensor:
    """All processes' ``tensor`` concatenated along dim 0 (no gradient)."""
    if not _distributed():
        return tensor
    parts = [torch.empty_like(tensor) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, tensor.contiguous())
    return torch.cat(parts, dim=0)


def gather_with_grad(tensor: torch.Tensor) -> torch.Tensor:
    """All processes' ``tensor`` concatenated along dim 0; gradients flow back to each process."""
    if not _distributed():
        return tensor
    return torch.cat(GatherLayer.apply(tensor), dim=0)
