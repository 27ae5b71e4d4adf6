"""Activation modules under upstream FastReID's names.

Each is torch's own function where torch has it: ``Mish`` is ``nn.Mish``, ``Swish`` is ``nn.SiLU``
(``x * sigmoid(x)``), ``GELU`` is ``nn.GELU`` with the tanh approximation (the formula upstream
writes out). ``MemoryEfficientSwish`` saves only its input for the backward pass and recomputes
the sigmoid there (``SwishImplementation``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

__all__ = ["Mish", "Swish", "MemoryEfficientSwish", "GELU"]


class Mish(nn.Mish):
    """``x * tanh(softplus(x))`` (Misra, 2019)."""


class Swish(nn.SiLU):
    """``x * sigmoid(x)`` (Ramachandran et al., 2017; torch's SiLU)."""


class SwishImplementation(torch.autograd.Function):
    """Swish whose backward recomputes ``sigmoid(x)`` from the saved input instead of keeping
    intermediate results: less memory for one more sigmoid."""

    @staticmethod
    def forward(ctx: Any, i: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(i)
        return i * torch.sigmoid(i)

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> torch.Tensor:
        (i,) = ctx.saved_tensors
        s = torch.sigmoid(i)
        # d/dx [x s(x)] = s + x s (1 - s)
        return grad_output * (s * (1 + i * (1 - s)))


class MemoryEfficientSwish(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return SwishImplementation.apply(x)


class GELU(nn.GELU):
    """GELU with the tanh approximation ``0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))``, as
    BERT and upstream use (torch's default ``nn.GELU`` is the exact erf form)."""

    def __init__(self) -> None:
        super().__init__(approximate="tanh")
