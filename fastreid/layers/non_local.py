"""Non-local block (Wang et al., 2018), dot-product form, as used by AGW and SBS.

Upstream FastReID's released block has **one** inner channel whatever ``reduc_ratio`` says (its
code computes ``reduc_ratio // reduc_ratio``), and every released AGW/SBS checkpoint was trained
with it, so that is the default here (``inter_channels="upstream"``). The paper's
``in_channels // reduc_ratio`` (half the channels by default) is ``inter_channels="half"``
(``MODEL.BACKBONE.NL_INTER_CHANNELS half``); such models do not load upstream's checkpoints.
"""

from __future__ import annotations

from typing import cast

import torch
from torch import nn

from .batch_norm import NormSpec, get_norm

__all__ = ["Non_local", "NL_INTER_CHANNELS", "nl_inter_channels"]

# MODEL.BACKBONE.NL_INTER_CHANNELS value -> inner channels from (input channels, reduction ratio)
NL_INTER_CHANNELS = {
    "upstream": lambda in_channels, reduc_ratio: 1,
    "half": lambda in_channels, reduc_ratio: in_channels // reduc_ratio,
}


def nl_inter_channels(mode: str, in_channels: int, reduc_ratio: int = 2) -> int:
    """Inner channels of a non-local block for ``MODEL.BACKBONE.NL_INTER_CHANNELS`` ``mode``."""
    if mode not in NL_INTER_CHANNELS:
        raise ValueError(
            f"non-local inner channels {mode!r} unknown; expected one of {', '.join(NL_INTER_CHANNELS)}"
        )
    return NL_INTER_CHANNELS[mode](in_channels, reduc_ratio)


class Non_local(nn.Module):  # noqa: N801  (upstream's class name)
    """``x + W(attention(x))`` with keys ``g``, ``theta``, ``phi`` (1x1 convs to the inner channels)
    and ``W.0`` (conv back) + ``W.1`` (norm, zero-initialised so the block starts as the identity)."""

    def __init__(
        self,
        in_channels: int,
        bn_norm: NormSpec = "BN",
        reduc_ratio: int = 2,
        inter_channels: str = "upstream",
        **norm_kwargs: object,
    ) -> None:
        super().__init__()
        self.in_channels = in_channels
        self.inter_channels = nl_inter_channels(inter_channels, in_channels, reduc_ratio)
        self.g = nn.Conv2d(in_channels, self.inter_channels, kernel_size=1)
        self.W = nn.Sequential(
            nn.Conv2d(self.inter_channels, in_channels, kernel_size=1),
            get_norm(bn_norm, in_channels, **norm_kwargs),
        )
        norm = self.W[1]
        nn.init.constant_(cast(torch.Tensor, norm.weight), 0.0)
        nn.init.constant_(cast(torch.Tensor, norm.bias), 0.0)
        self.theta = nn.Conv2d(in_channels, self.inter_channels, kernel_size=1)
        self.phi = nn.Conv2d(in_channels, self.inter_channels, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, _, h, w = x.shape
        g_x = self.g(x).view(n, self.inter_channels, -1).permute(0, 2, 1)
        theta_x = self.theta(x).view(n, self.inter_channels, -1).permute(0, 2, 1)
        phi_x = self.phi(x).view(n, self.inter_channels, -1)
        affinity = torch.matmul(theta_x, phi_x)
        affinity = affinity / affinity.size(-1)
        y = torch.matmul(affinity, g_x).permute(0, 2, 1).contiguous()
        y = y.view(n, self.inter_channels, h, w)
        return self.W(y) + x
