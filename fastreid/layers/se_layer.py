"""Squeeze-and-excitation gate (``MODEL.BACKBONE.WITH_SE``)."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["SELayer"]


class SELayer(nn.Module):
    """Channel gate with keys ``fc.0.weight`` and ``fc.2.weight`` (bias-free linears)."""

    def __init__(self, channel: int, reduction: int = 16) -> None:
        super().__init__()
        hidden = int(channel / reduction)
        self.avg_pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Sequential(
            nn.Linear(channel, hidden, bias=False),
            nn.ReLU(inplace=True),
            nn.Linear(hidden, channel, bias=False),
            nn.Sigmoid(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c = x.shape[:2]
        gate = self.fc(self.avg_pool(x).view(n, c)).view(n, c, 1, 1)
        return x * gate
