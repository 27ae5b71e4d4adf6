"""All-gather with gradients: ``torch.cat(GatherLayer.apply(x), dim=0)`` is every process's ``x``,
and the gradient reaching each process's ``x`` is the sum of what every process's loss puts on it.

Upstream's backward keeps only the gradient of this process's own loss (the first OpenSelfSup
version of this layer, since corrected there); summing over processes is the gradient of the
total loss, as ``torch.distributed.nn.functional.all_gather`` computes it. Without an initialised
process group (one process) it returns ``(x,)`` and passes the gradient through.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

__all__ = ["GatherLayer"]


def _world_size() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


class GatherLayer(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, input: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if _world_size() == 1:
            return (input.clone(),)
        output = [torch.zeros_like(input) for _ in range(_world_size())]
        dist.all_gather(output, input.contiguous())
        return tuple(output)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> torch.Tensor:
        if _world_size() == 1:
            return grads[0]
        all_grads = torch.stack(grads)
        dist.all_reduce(all_grads)
        return all_grads[dist.get_rank()]
