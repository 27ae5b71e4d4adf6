"""``GatherLayer``: all-gather that lets gradients flow back to each process's own part (upstream
FastReID's ``fastreid.layers.gather_layer``, used by contrastive losses over the global batch).
In a single process (no ``torch.distributed`` group) it returns ``(input,)``."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

__all__ = ["GatherLayer"]


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


class GatherLayer(torch.autograd.Function):
    """``GatherLayer.apply(x)``: a tuple with every process's ``x`` (same shape on every rank)."""

    @staticmethod
    def forward(ctx: Any, input: torch.Tensor) -> tuple[torch.Tensor, ...]:
        ctx.save_for_backward(input)
        if not _distributed():
            return (input.clone(),)
        output = [torch.zeros_like(input) for _ in range(dist.get_world_size())]
        dist.all_gather(output, input)
        return tuple(output)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> torch.Tensor:
        (input,) = ctx.saved_tensors
        rank = dist.get_rank() if _distributed() else 0
        grad_out = torch.zeros_like(input)
        grad_out[:] = grads[rank]
        return grad_out
