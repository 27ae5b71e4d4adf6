"""Baseline: backbone -> head -> losses, upstream FastReID's main meta-architecture."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from fastreid.config import ConfigError, configurable

from ..backbones import build_backbone
from ..freeze import FrozenModulesMixin
from ..heads import build_heads
from ..losses import (
    classification_accuracy,
    cross_entropy_loss,
    focal_loss,
    pairwise_circleloss,
    pairwise_cosface,
    triplet_loss,
)
from .build import META_ARCH_REGISTRY

__all__ = ["Baseline", "SUPPORTED_LOSSES"]

# LOSSES.NAME entry -> key in the loss dict
SUPPORTED_LOSSES = {
    "CrossEntropyLoss": "loss_cls",
    "TripletLoss": "loss_triplet",
    "CircleLoss": "loss_circle",
    "Cosface": "loss_cosface",
    "FocalLoss": "loss_focal",
}


def _report_accuracy(accuracy: torch.Tensor) -> None:
    """Put ``cls_accuracy`` into the trainer's event storage, when there is one."""
    try:
        from fastreid.utils.events import get_event_storage
    except ImportError:
        return
    try:
        storage = get_event_storage()
    except (AssertionError, RuntimeError, LookupError):  # no storage outside a training loop
        return
    storage.put_scalar("cls_accuracy", float(accuracy))


@META_ARCH_REGISTRY.register()
class Baseline(FrozenModulesMixin, nn.Module):
    """Images in (``batch["images"]``: uint8 or float 0..255, N x 3 x H x W), normalised inside
    with the non-persistent ``pixel_mean``/``pixel_std`` buffers.

    Training: ``model(batch)`` returns the loss dict (``loss_cls``, ``loss_triplet``, ...).
    Eval: ``model(batch)`` returns N x D features.
    """

    @configurable
    def __init__(
        self,
        *,
        backbone: nn.Module,
        heads: nn.Module,
        pixel_mean: Sequence[float],
        pixel_std: Sequence[float],
        loss_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.backbone = backbone
        self.heads = heads
        self.loss_kwargs = dict(loss_kwargs or {"loss_names": ("CrossEntropyLoss",), "ce": {"eps": 0.0, "alpha": 0.2, "scale": 1.0}})
        unknown = [n for n in self.loss_kwargs["loss_names"] if n not in SUPPORTED_LOSSES]
        if unknown:
            raise ConfigError(f"MODEL.LOSSES.NAME: {', '.join(map(repr, unknown))} not supported; "
                              f"supported losses: {', '.join(SUPPORTED_LOSSES)}")
        if len(pixel_mean) != len(pixel_std):
            raise ConfigError(f"MODEL.PIXEL_MEAN has {len(pixel_mean)} values but MODEL.PIXEL_STD has {len(pixel_std)}")
        self.register_buffer("pixel_mean", torch.tensor(pixel_mean, dtype=torch.float32).view(1, -1, 1, 1), persistent=False)
        self.register_buffer("pixel_std", torch.tensor(pixel_std, dtype=torch.float32).view(1, -1, 1, 1), persistent=False)

    @classmethod
    def from_config(cls, cfg) -> dict:
        backbone = build_backbone(cfg)
        out_channels = getattr(backbone, "out_channels", None)
        if out_channels is not None and out_channels != cfg.MODEL.BACKBONE.FEAT_DIM:
            raise ConfigError(
                f"MODEL.BACKBONE.FEAT_DIM is {cfg.MODEL.BACKBONE.FEAT_DIM} but {cfg.MODEL.BACKBONE.NAME} "
                f"(DEPTH {cfg.MODEL.BACKBONE.DEPTH}) outputs {out_channels} channels; set FEAT_DIM {out_channels}"
            )
        losses = cfg.MODEL.LOSSES
        return {
            "backbone": backbone,
            "heads": build_heads(cfg),
            "pixel_mean": cfg.MODEL.PIXEL_MEAN,
            "pixel_std": cfg.MODEL.PIXEL_STD,
            "loss_kwargs": {
                "loss_names": tuple(losses.NAME),
                "ce": {"eps": losses.CE.EPSILON, "alpha": losses.CE.ALPHA, "scale": losses.CE.SCALE},
                "tri": {"margin": losses.TRI.MARGIN, "norm_feat": losses.TRI.NORM_FEAT,
                        "hard_mining": losses.TRI.HARD_MINING, "scale": losses.TRI.SCALE},
                "circle": {"margin": losses.CIRCLE.MARGIN, "gamma": losses.CIRCLE.GAMMA, "scale": losses.CIRCLE.SCALE},
                "cosface": {"margin": losses.COSFACE.MARGIN, "gamma": losses.COSFACE.GAMMA,
                            "scale": losses.COSFACE.SCALE},
                "focal": {"alpha": losses.FL.ALPHA, "gamma": losses.FL.GAMMA, "scale": losses.FL.SCALE},
            },
        }

    @property
    def device(self) -> torch.device:
        return self.pixel_mean.device

    def forward(self, batched_inputs: Mapping[str, Any] | torch.Tensor):
        images = self.preprocess_image(batched_inputs)
        features = self.backbone(images)
        if not self.training:
            return self.heads(features)

        if not isinstance(batched_inputs, Mapping) or "targets" not in batched_inputs:
            raise ValueError("Baseline in training mode needs a batch dict with 'targets' (person ids)")
        targets = batched_inputs["targets"].to(self.device, non_blocking=True).long()
        # Precise-BN passes are run on data whose ids may exceed NUM_CLASSES; they mark the batch
        # with negative targets and only need the forward pass (upstream's convention).
        if targets.sum() < 0:
            targets = torch.zeros_like(targets)
        outputs = self.heads(features, targets)
        # Losses in float32 even under mixed precision (log-softmax, exp and sums of many terms).
        with torch.autocast(device_type=self.device.type, enabled=False):
            outputs = {k: v.float() if torch.is_tensor(v) and v.is_floating_point() else v
                       for k, v in outputs.items()}
            return self.losses(outputs, targets)

    def preprocess_image(self, batched_inputs: Mapping[str, Any] | torch.Tensor) -> torch.Tensor:
        """``(images - pixel_mean) / pixel_std`` as float on the model's device (input untouched)."""
        if isinstance(batched_inputs, Mapping):
            if "images" not in batched_inputs:
                raise ValueError(f"The batch dict has no 'images' (keys: {sorted(batched_inputs)})")
            images = batched_inputs["images"]
        elif isinstance(batched_inputs, torch.Tensor):
            images = batched_inputs
        else:
            raise TypeError(f"Baseline expects a batch dict or an image tensor, got {type(batched_inputs).__name__}")
        if images.dim() != 4 or images.size(1) != self.pixel_mean.size(1):
            raise ValueError(f"images must be N x {self.pixel_mean.size(1)} x H x W, got shape {tuple(images.shape)}")
        images = images.to(self.device, non_blocking=True)
        if not images.is_floating_point():
            images = images.float()
        return (images - self.pixel_mean) / self.pixel_std

    def losses(self, outputs: Mapping[str, torch.Tensor], gt_labels: torch.Tensor) -> dict[str, torch.Tensor]:
        """The loss dict from the head's training outputs (upstream's names and maths)."""
        cls_outputs = outputs["cls_outputs"]
        pred_features = outputs["features"]
        num_classes = cls_outputs.size(1)
        if gt_labels.numel() and (int(gt_labels.max()) >= num_classes or int(gt_labels.min()) < 0):
            raise ValueError(f"Target ids must lie in [0, {num_classes}) (MODEL.HEADS.NUM_CLASSES = {num_classes}); "
                             f"got ids {int(gt_labels.min())}..{int(gt_labels.max())}")
        _report_accuracy(classification_accuracy(outputs["pred_class_logits"].detach(), gt_labels))

        kw = self.loss_kwargs
        names = kw["loss_names"]
        loss_dict: dict[str, torch.Tensor] = {}
        if "CrossEntropyLoss" in names:
            ce = kw["ce"]
            loss_dict["loss_cls"] = cross_entropy_loss(cls_outputs, gt_labels, ce["eps"], ce["alpha"]) * ce["scale"]
        if "TripletLoss" in names:
            tri = kw["tri"]
            loss_dict["loss_triplet"] = triplet_loss(
                pred_features, gt_labels, tri["margin"], tri["norm_feat"], tri["hard_mining"]
            ) * tri["scale"]
        if "CircleLoss" in names:
            c = kw["circle"]
            loss_dict["loss_circle"] = pairwise_circleloss(pred_features, gt_labels, c["margin"], c["gamma"]) * c["scale"]
        if "Cosface" in names:
            c = kw["cosface"]
            loss_dict["loss_cosface"] = pairwise_cosface(pred_features, gt_labels, c["margin"], c["gamma"]) * c["scale"]
        if "FocalLoss" in names:
            f = kw["focal"]
            loss_dict["loss_focal"] = focal_loss(cls_outputs, gt_labels, f["alpha"], f["gamma"]) * f["scale"]
        return loss_dict
