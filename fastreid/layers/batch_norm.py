"""Normalisation layers selected by name (``MODEL.BACKBONE.NORM`` / ``MODEL.HEADS.NORM``), and IBN-a.

All of them keep BatchNorm's state-dict keys (``weight``, ``bias``, ``running_mean``,
``running_var``, ``num_batches_tracked``), so a checkpoint trained with one loads into another;
``FrozenBatchNorm`` has upstream's keys, without ``num_batches_tracked`` (and ignores it on load).
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Union, cast

import torch
import torch.nn.functional as F
from torch import nn
from torchvision.ops import FrozenBatchNorm2d

__all__ = [
    "BatchNorm",
    "SyncBatchNorm",
    "GhostBatchNorm",
    "FrozenBatchNorm",
    "IBN",
    "get_norm",
    "NORM_NAMES",
]

logger = logging.getLogger(__name__)


class _FreezableAffine(nn.Module):
    """The constructor shared by :class:`BatchNorm` and :class:`SyncBatchNorm` (mixed in before
    torch's class): initial values for weight and bias, and either of them frozen. Options meant
    for other norms are ignored."""

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float = 0.1,
        weight_freeze: bool = False,
        bias_freeze: bool = False,
        weight_init: float | None = 1.0,
        bias_init: float | None = 0.0,
        **_: object,
    ) -> None:
        super().__init__(num_features, eps=eps, momentum=momentum)
        weight, bias = cast(nn.Parameter, self.weight), cast(nn.Parameter, self.bias)
        if weight_init is not None:
            nn.init.constant_(weight, weight_init)
        if bias_init is not None:
            nn.init.constant_(bias, bias_init)
        weight.requires_grad_(not weight_freeze)
        bias.requires_grad_(not bias_freeze)


class BatchNorm(_FreezableAffine, nn.BatchNorm2d):
    """BatchNorm2d whose weight/bias can start frozen (the BNNeck freezes its bias)."""


class SyncBatchNorm(_FreezableAffine, nn.SyncBatchNorm):
    """Cross-process BatchNorm. Outside a multi-process CUDA run it is ordinary BatchNorm.

    torch's SyncBatchNorm only synchronises CUDA tensors; on the CPU (gloo) it would fail, so it
    falls back to per-process statistics there and says so once.
    """

    _warned_cpu = False

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
        if self.training and distributed and not input.is_cuda:
            if not SyncBatchNorm._warned_cpu:
                logger.warning(
                    "NORM syncBN: tensors are not on CUDA, so BatchNorm statistics are "
                    "computed per process (not synchronised)."
                )
                SyncBatchNorm._warned_cpu = True
            return nn.modules.batchnorm._BatchNorm.forward(self, input)
        return super().forward(input)


class GhostBatchNorm(BatchNorm):
    """Ghost BatchNorm: in training, statistics come from ``num_splits`` sub-batches.

    Sample ``i`` belongs to sub-batch ``i % num_splits`` (upstream FastReID's grouping). The running
    statistics are the mean over the sub-batches, so evaluation is plain BatchNorm.
    """

    def __init__(self, num_features: int, num_splits: int = 1, **kwargs: Any) -> None:
        super().__init__(num_features, **kwargs)
        if num_splits < 1:
            raise ValueError(f"GhostBatchNorm needs num_splits >= 1, got {num_splits}")
        self.num_splits = num_splits

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        s = self.num_splits
        if not self.training or s == 1:
            return super().forward(input)
        N, C = input.shape[:2]
        if N % s != 0:
            raise ValueError(
                f"GhostBatchNorm: batch size {N} is not divisible by num_splits={s} "
                "(MODEL.BACKBONE.NORM_SPLIT); change the batch size or the split"
            )
        if self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
        # BatchNorm always tracks running statistics with a fixed momentum
        assert self.running_mean is not None and self.running_var is not None and self.momentum is not None
        # Each (sub-batch, channel) pair becomes one channel of a BatchNorm over N / s samples.
        running_mean = self.running_mean.repeat(s)
        running_var = self.running_var.repeat(s)
        grouped = input.reshape(N // s, s * C, *input.shape[2:])
        out = F.batch_norm(
            grouped,
            running_mean,
            running_var,
            self.weight.repeat(s),
            self.bias.repeat(s),
            True,
            self.momentum,
            self.eps,
        )
        with torch.no_grad():
            self.running_mean.copy_(running_mean.view(s, C).mean(0))
            self.running_var.copy_(running_var.view(s, C).mean(0))
        return out.view_as(input)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", num_splits={self.num_splits}"


class FrozenBatchNorm(FrozenBatchNorm2d):
    """BatchNorm with fixed statistics and affine parameters (torchvision's ``FrozenBatchNorm2d``):
    ``weight``, ``bias``, ``running_mean`` and ``running_var`` are buffers, nothing trains and
    nothing is updated. Its state dict is upstream's: no ``num_batches_tracked`` (one in a loaded
    state dict, e.g. an ImageNet ResNet's, is ignored). It starts as the identity
    (``running_var = 1 - eps``); :meth:`convert_frozen_batchnorm` freezes the norms of a model."""

    def __init__(self, num_features: int, eps: float = 1e-5, **kwargs: object) -> None:
        super().__init__(num_features, eps=eps)
        self.num_features = num_features
        self.running_var.fill_(1.0 - eps)

    @classmethod
    def convert_frozen_batchnorm(cls, module: nn.Module) -> nn.Module:
        """``module`` with every ``BatchNorm2d``/``SyncBatchNorm`` replaced by a FrozenBatchNorm
        holding its statistics and affine values (a norm itself comes back as a new module; any
        other module is converted in place and returned)."""
        if isinstance(module, (nn.BatchNorm2d, nn.SyncBatchNorm)):
            frozen = cls(module.num_features, eps=module.eps)
            # the norm's own tensors (dtype and device kept), detached from its parameters
            tensors = {"running_mean": module.running_mean, "running_var": module.running_var}
            if module.affine:
                tensors.update(weight=module.weight, bias=module.bias)
            for name, tensor in tensors.items():
                if tensor is not None:
                    setattr(frozen, name, tensor.detach().clone())
            return frozen
        for name, child in module.named_children():
            converted = cls.convert_frozen_batchnorm(child)
            if converted is not child:
                module.add_module(name, converted)
        return module


NormSpec = Union[str, Callable[..., nn.Module]]

_NORMS: dict[str, Callable[..., nn.Module]] = {
    "BN": BatchNorm,
    "syncBN": SyncBatchNorm,
    "GhostBN": GhostBatchNorm,
    "FrozenBN": FrozenBatchNorm,
    "GN": lambda channels, **_: nn.GroupNorm(32, channels),
}
NORM_NAMES = tuple(_NORMS)
_LOWER = {name.lower(): name for name in _NORMS}


def get_norm(norm: NormSpec, out_channels: int, **kwargs: object) -> nn.Module:
    """Build the normalisation layer ``norm`` ("BN", "syncBN", "GhostBN", "FrozenBN", "GN", or a
    callable taking the channel count) for ``out_channels`` channels."""
    if callable(norm):
        return norm(out_channels, **kwargs)
    name = _LOWER.get(str(norm).lower())
    if name is None:
        raise ValueError(f"Unknown normalisation {norm!r}; expected one of {', '.join(NORM_NAMES)}")
    if name != "GhostBN":
        kwargs.pop("num_splits", None)
    return _NORMS[name](out_channels, **kwargs)


class IBN(nn.Module):
    """IBN-a: InstanceNorm on the first ``int(planes / 2)`` channels (affine, keys ``IN.*``),
    ``bn_norm`` on the rest (keys ``BN.*``), as in IBN-Net's resnet_ibn_a and upstream FastReID."""

    def __init__(self, planes: int, bn_norm: NormSpec = "BN", **norm_kwargs: object) -> None:
        super().__init__()
        self.half_channels = int(planes / 2)
        self.IN = nn.InstanceNorm2d(self.half_channels, affine=True)
        self.BN = get_norm(bn_norm, planes - self.half_channels, **norm_kwargs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        first, second = torch.split(x, [self.half_channels, x.shape[1] - self.half_channels], dim=1)
        return torch.cat((self.IN(first.contiguous()), self.BN(second.contiguous())), dim=1)
