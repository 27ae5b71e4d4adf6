"""Initialisations used by upstream FastReID (so fresh models start from the same distribution)."""

from __future__ import annotations

from torch import nn

__all__ = ["weights_init_kaiming", "weights_init_classifier"]


def weights_init_kaiming(m: nn.Module) -> None:
    """Linear: N(0, 0.01); conv: Kaiming normal (fan_out); BatchNorm: weight 1, bias 0."""
    if isinstance(m, nn.Linear):
        nn.init.normal_(m.weight, 0, 0.01)
        if m.bias is not None:
            nn.init.constant_(m.bias, 0.0)
    elif isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Conv3d)):
        nn.init.kaiming_normal_(m.weight, mode="fan_out")
        if m.bias is not None:
            nn.init.constant_(m.bias, 0.0)
    elif isinstance(m, nn.modules.batchnorm._BatchNorm) and m.affine:
        nn.init.constant_(m.weight, 1.0)
        nn.init.constant_(m.bias, 0.0)


def weights_init_classifier(m: nn.Module) -> None:
    """Linear: N(0, 0.001), bias 0."""
    if isinstance(m, nn.Linear):
        nn.init.normal_(m.weight, std=0.001)
        if m.bias is not None:
            nn.init.constant_(m.bias, 0.0)
