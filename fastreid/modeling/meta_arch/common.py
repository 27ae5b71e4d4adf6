"""Pieces every meta-architecture shares: pixel normalisation inside the model, the loss
settings read from ``MODEL.LOSSES``, the loss terms, and the accuracy reported to the trainer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import torch
from torch import nn

from fastreid.config import ConfigError
from fastreid.utils.events import get_event_storage

from ..losses import (
    cross_entropy_loss,
    focal_loss,
    log_accuracy,
    pairwise_circleloss,
    pairwise_cosface,
    triplet_loss,
)

__all__ = [
    "SUPPORTED_LOSSES",
    "PixelNormalizer",
    "loss_kwargs_from_cfg",
    "check_loss_names",
    "check_targets",
    "classification_loss",
    "metric_loss",
    "report_accuracy",
    "loss_precision",
]

# LOSSES.NAME entry -> key in the loss dict
SUPPORTED_LOSSES = {
    "CrossEntropyLoss": "loss_cls",
    "TripletLoss": "loss_triplet",
    "CircleLoss": "loss_circle",
    "Cosface": "loss_cosface",
    "FocalLoss": "loss_focal",
}
DEFAULT_LOSS_KWARGS: dict[str, Any] = {
    "loss_names": ("CrossEntropyLoss",),
    "ce": {"eps": 0.0, "alpha": 0.2, "scale": 1.0},
}


def loss_precision(value: Any) -> Any:
    """``value`` for the loss computation: half and bfloat16 tensors (mixed precision) as float32,
    because log-softmax, exp and sums of many terms need it; float32 and float64 unchanged."""
    if torch.is_tensor(value) and value.is_floating_point() and value.dtype.itemsize < 4:
        return value.float()
    return value


def report_accuracy(logits: torch.Tensor, targets: torch.Tensor) -> None:
    """Put ``cls_accuracy`` into the trainer's event storage, when there is one."""
    try:
        get_event_storage()
    except RuntimeError:  # outside a training loop
        return
    log_accuracy(logits.detach(), targets)


def loss_kwargs_from_cfg(cfg) -> dict[str, Any]:
    """Upstream's ``loss_kwargs`` dict from ``MODEL.LOSSES``."""
    losses = cfg.MODEL.LOSSES
    return {
        "loss_names": tuple(losses.NAME),
        "ce": {"eps": losses.CE.EPSILON, "alpha": losses.CE.ALPHA, "scale": losses.CE.SCALE},
        "tri": {
            "margin": losses.TRI.MARGIN,
            "norm_feat": losses.TRI.NORM_FEAT,
            "hard_mining": losses.TRI.HARD_MINING,
            "scale": losses.TRI.SCALE,
        },
        "circle": {
            "margin": losses.CIRCLE.MARGIN,
            "gamma": losses.CIRCLE.GAMMA,
            "scale": losses.CIRCLE.SCALE,
        },
        "cosface": {
            "margin": losses.COSFACE.MARGIN,
            "gamma": losses.COSFACE.GAMMA,
            "scale": losses.COSFACE.SCALE,
        },
        "focal": {"alpha": losses.FL.ALPHA, "gamma": losses.FL.GAMMA, "scale": losses.FL.SCALE},
    }


def check_loss_names(names: Sequence[str], supported: Sequence[str] = tuple(SUPPORTED_LOSSES)) -> None:
    unknown = [n for n in names if n not in supported]
    if unknown:
        raise ConfigError(
            f"MODEL.LOSSES.NAME: {', '.join(map(repr, unknown))} not supported; "
            f"supported losses: {', '.join(supported)}"
        )


def check_targets(targets: torch.Tensor, num_classes: int) -> None:
    if targets.numel() and (int(targets.max()) >= num_classes or int(targets.min()) < 0):
        raise ValueError(
            f"Target ids must lie in [0, {num_classes}) (MODEL.HEADS.NUM_CLASSES = {num_classes}); "
            f"got ids {int(targets.min())}..{int(targets.max())}"
        )


def classification_loss(
    name: str, logits: torch.Tensor, targets: torch.Tensor, kw: Mapping[str, Any]
) -> torch.Tensor:
    """``CrossEntropyLoss`` or ``FocalLoss`` on class logits, times its ``SCALE``."""
    if name == "CrossEntropyLoss":
        ce = kw["ce"]
        return cross_entropy_loss(logits, targets, ce["eps"], ce["alpha"]) * ce["scale"]
    f = kw["focal"]
    return focal_loss(logits, targets, f["alpha"], f["gamma"]) * f["scale"]


def metric_loss(
    name: str, features: torch.Tensor, targets: torch.Tensor, kw: Mapping[str, Any]
) -> torch.Tensor:
    """``TripletLoss``, ``CircleLoss`` or ``Cosface`` on features, times its ``SCALE``."""
    if name == "TripletLoss":
        t = kw["tri"]
        return triplet_loss(features, targets, t["margin"], t["norm_feat"], t["hard_mining"]) * t["scale"]
    c = kw["circle" if name == "CircleLoss" else "cosface"]
    loss = pairwise_circleloss if name == "CircleLoss" else pairwise_cosface
    return loss(features, targets, c["margin"], c["gamma"]) * c["scale"]


class PixelNormalizer:
    """Mixin for an ``nn.Module``: non-persistent ``pixel_mean``/``pixel_std`` buffers, ``device``
    and ``preprocess_image`` (images 0..255 in, normalised float on the model's device out)."""

    pixel_mean: torch.Tensor  # buffers, registered by register_pixel_stats
    pixel_std: torch.Tensor

    def register_pixel_stats(self, pixel_mean: Sequence[float], pixel_std: Sequence[float]) -> None:
        if len(pixel_mean) != len(pixel_std):
            raise ConfigError(
                f"MODEL.PIXEL_MEAN has {len(pixel_mean)} values but MODEL.PIXEL_STD has {len(pixel_std)}"
            )
        for name, values in (("pixel_mean", pixel_mean), ("pixel_std", pixel_std)):
            module = cast(nn.Module, self)  # a mixin of nn.Module subclasses
            module.register_buffer(
                name, torch.tensor(values, dtype=torch.float32).view(1, -1, 1, 1), persistent=False
            )

    @property
    def device(self) -> torch.device:
        return self.pixel_mean.device

    def preprocess_image(self, batched_inputs: Mapping[str, Any] | torch.Tensor) -> torch.Tensor:
        """``(images - pixel_mean) / pixel_std`` as float on the model's device (input untouched)."""
        if isinstance(batched_inputs, Mapping):
            if "images" not in batched_inputs:
                raise ValueError(f"The batch dict has no 'images' (keys: {sorted(batched_inputs)})")
            images = batched_inputs["images"]
        elif isinstance(batched_inputs, torch.Tensor):
            images = batched_inputs
        else:
            raise TypeError(
                f"{type(self).__name__} expects a batch dict or an image tensor, "
                f"got {type(batched_inputs).__name__}"
            )
        channels = self.pixel_mean.size(1)
        if images.dim() != 4 or images.size(1) != channels:
            raise ValueError(f"images must be N x {channels} x H x W, got shape {tuple(images.shape)}")
        images = images.to(self.device, non_blocking=True)
        if not images.is_floating_point():
            images = images.float()
        return (images - self.pixel_mean) / self.pixel_std

    def training_targets(self, batched_inputs: Mapping[str, Any] | torch.Tensor) -> torch.Tensor:
        """The batch's ``targets`` on the model's device; all zeros for precise-BN passes, which
        mark their batches with negative targets (upstream's convention). Integer ids become int64
        (what the classification losses index with); float targets (a subclass's multi-label
        attributes, as upstream's FastAttr passes) are kept as they are."""
        if not isinstance(batched_inputs, Mapping) or "targets" not in batched_inputs:
            raise ValueError(
                f"{type(self).__name__} in training mode needs a batch dict with 'targets' (person ids)"
            )
        targets = batched_inputs["targets"].to(self.device, non_blocking=True)
        if not targets.is_floating_point():
            targets = targets.long()
        if targets.sum() < 0:
            targets = torch.zeros_like(targets)
        return targets
