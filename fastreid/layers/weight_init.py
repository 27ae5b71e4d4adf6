"""Initialisations used by upstream FastReID (so fresh models start from the same distribution),
and the variance-scaling family ViT-style models use (``trunc_normal_`` is torch's)."""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = [
    "weights_init_kaiming",
    "weights_init_classifier",
    "trunc_normal_",
    "variance_scaling_",
    "lecun_normal_",
]

# Standard deviation of a standard normal truncated to [-2, 2]: truncated draws are divided by it
# so the variance is the one asked for.
_TRUNCATED_STD = 0.87962566103423978


def weights_init_kaiming(m: nn.Module) -> None:
    """Linear: N(0, 0.01); conv: Kaiming normal (fan_out); BatchNorm: weight 1, bias 0."""
    if isinstance(m, nn.Linear):
        nn.init.normal_(m.weight, 0, 0.01)
        if m.bias is not None:
            nn.init.constant_(m.bias, 0.0)
    elif isinstance(m, nn.modules.conv._ConvNd):
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


def trunc_normal_(
    tensor: torch.Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0
) -> torch.Tensor:
    """Fill ``tensor`` in place from N(mean, std^2) truncated to [a, b] (``nn.init.trunc_normal_``)."""
    return nn.init.trunc_normal_(tensor, mean=mean, std=std, a=a, b=b)


def _fans(tensor: torch.Tensor) -> tuple[int, int]:
    if tensor.dim() < 2:
        raise ValueError(
            f"fan in and fan out need a tensor of 2 or more dimensions, got shape {tuple(tensor.shape)}"
        )
    receptive_field = math.prod(tensor.shape[2:])
    return tensor.size(1) * receptive_field, tensor.size(0) * receptive_field


@torch.no_grad()
def variance_scaling_(
    tensor: torch.Tensor, scale: float = 1.0, mode: str = "fan_in", distribution: str = "normal"
) -> torch.Tensor:
    """Fill ``tensor`` in place with variance ``scale / n``, ``n`` the fan in, the fan out or their
    mean (``mode`` "fan_in", "fan_out", "fan_avg"), drawn from a "normal", "truncated_normal" or
    "uniform" ``distribution`` (TensorFlow's ``VarianceScaling``).

    "truncated_normal" truncates at two standard deviations. (Upstream truncates at +-2 in absolute
    units, which for the small deviations of weights truncates nothing, so its variance came out
    1.29 times too large; timm, where the code comes from, has since fixed it the same way.)"""
    fan_in, fan_out = _fans(tensor)
    denominators = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2}
    if mode not in denominators:
        raise ValueError(f"invalid mode {mode!r}; expected one of {', '.join(denominators)}")
    variance = scale / denominators[mode]
    if distribution == "truncated_normal":
        trunc_normal_(tensor, std=1.0, a=-2.0, b=2.0).mul_(math.sqrt(variance) / _TRUNCATED_STD)
    elif distribution == "normal":
        tensor.normal_(std=math.sqrt(variance))
    elif distribution == "uniform":
        bound = math.sqrt(3 * variance)
        tensor.uniform_(-bound, bound)
    else:
        raise ValueError(f"invalid distribution {distribution}")
    return tensor


def lecun_normal_(tensor: torch.Tensor) -> torch.Tensor:
    """LeCun normal: truncated normal with variance ``1 / fan_in``."""
    return variance_scaling_(tensor, mode="fan_in", distribution="truncated_normal")
