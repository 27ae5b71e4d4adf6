"""Activations of upstream FastReID's ``fastreid.layers.activation`` (Mish, Swish, a memory-saving
Swish, GELU), on torch's own kernels where torch has them."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["Mish", "Swish", "MemoryEfficientSwish", "GELU"]


class Mish(nn.Module):
    """``x * tanh(softplus(x))`` (Misra, 2019)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.mish(x)


class Swish(nn.Module):
    """``x * sigmoid(x)`` (SiLU)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x)


class SwishImplementation(torch.autograd.Function):
    """Swish that keeps only its input for the backward pass (not ``sigmoid(x)`` as well)."""

    @staticmethod
    def forward(ctx: Any, i: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(i)
        return i * torch.sigmoid(i)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> torch.Tensor:
        (i,) = ctx.saved_tensors
        sigmoid = torch.sigmoid(i)
        return grad_output * (sigmoid * (1 + i * (1 - sigmoid)))


class MemoryEfficientSwish(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return SwishImplementation.apply(x)


class GELU(nn.Module):
    """GELU with upstream's tanh approximation (as in BERT and ViT)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x, approximate="tanh")
