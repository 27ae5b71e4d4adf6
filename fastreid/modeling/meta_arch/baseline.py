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
from .build import META_ARCH_REGISTRY
from .common import (
    DEFAULT_LOSS_KWARGS,
    SUPPORTED_LOSSES,
    PixelNormalizer,
    check_loss_names,
    check_targets,
    classification_loss,
    loss_kwargs_from_cfg,
    loss_precision,
    metric_loss,
    report_accuracy,
)

__all__ = ["Baseline", "SUPPORTED_LOSSES"]


@META_ARCH_REGISTRY.register()
class Baseline(FrozenModulesMixin, PixelNormalizer, nn.Module):
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
        self.loss_kwargs = dict(loss_kwargs or DEFAULT_LOSS_KWARGS)
        if type(self).losses is Baseline.losses:  # a subclass with its own losses knows its names
            check_loss_names(self.loss_kwargs["loss_names"])
        self.register_pixel_stats(pixel_mean, pixel_std)

    @classmethod
    def from_config(cls, cfg) -> dict:
        backbone = build_backbone(cfg)
        out_channels = getattr(backbone, "out_channels", None)
        if out_channels is not None and out_channels != cfg.MODEL.BACKBONE.FEAT_DIM:
            raise ConfigError(
                f"MODEL.BACKBONE.FEAT_DIM is {cfg.MODEL.BACKBONE.FEAT_DIM} but {cfg.MODEL.BACKBONE.NAME} "
                f"(DEPTH {cfg.MODEL.BACKBONE.DEPTH}) outputs {out_channels} channels; set FEAT_DIM {out_channels}"
            )
        return {
            "backbone": backbone,
            "heads": build_heads(cfg),
            "pixel_mean": cfg.MODEL.PIXEL_MEAN,
            "pixel_std": cfg.MODEL.PIXEL_STD,
            "loss_kwargs": loss_kwargs_from_cfg(cfg),
        }

    def forward(self, batched_inputs: Mapping[str, Any] | torch.Tensor):
        images = self.preprocess_image(batched_inputs)
        if getattr(self.backbone, "uses_camera_ids", False):  # ViT with camera embeddings
            if not isinstance(batched_inputs, Mapping) or "camids" not in batched_inputs:
                raise ValueError(
                    "This model's backbone uses camera ids (MODEL.BACKBONE.SIE_CAMERAS): "
                    "pass a batch dict with 'camids'"
                )
            features = self.backbone(images, batched_inputs["camids"])
        else:
            features = self.backbone(images)
        if not self.training:
            return self.heads(features)

        targets = self.training_targets(batched_inputs)
        outputs = self.heads(features, targets)
        with torch.autocast(device_type=self.device.type, enabled=False):
            return self.losses({k: loss_precision(v) for k, v in outputs.items()}, targets)

    def losses(self, outputs: Mapping[str, torch.Tensor], gt_labels: torch.Tensor) -> dict[str, torch.Tensor]:
        """The loss dict from the head's training outputs (upstream's names and maths)."""
        cls_outputs = outputs["cls_outputs"]
        pred_features = outputs["features"]
        check_targets(gt_labels, cls_outputs.size(1))
        report_accuracy(outputs["pred_class_logits"], gt_labels)
        loss_dict: dict[str, torch.Tensor] = {}
        names = self.loss_kwargs["loss_names"]
        for name in (n for n in SUPPORTED_LOSSES if n in names):  # upstream's order
            if name in ("CrossEntropyLoss", "FocalLoss"):
                loss_dict[SUPPORTED_LOSSES[name]] = classification_loss(
                    name, cls_outputs, gt_labels, self.loss_kwargs
                )
            else:
                loss_dict[SUPPORTED_LOSSES[name]] = metric_loss(
                    name, pred_features, gt_labels, self.loss_kwargs
                )
        return loss_dict
