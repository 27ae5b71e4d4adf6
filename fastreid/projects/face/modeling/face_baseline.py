"""``FaceBaseline``: fastreid's ``Baseline`` that, with Partial FC, hands its embeddings and
labels to the trainer instead of computing a loss (upstream FastFace's meta architecture)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from fastreid.config import configurable
from fastreid.modeling.meta_arch.baseline import Baseline
from fastreid.modeling.meta_arch.build import META_ARCH_REGISTRY

from ...registration import register_once

__all__ = ["FaceBaseline"]


class FaceBaseline(Baseline):
    """Without Partial FC: ``Baseline`` (the head's classifier, ``MODEL.LOSSES``).

    With ``MODEL.HEADS.PFC.ENABLED``, training ``model(batch)`` returns ``(embeddings, targets)``:
    the N x D embeddings (with their graph) and the N labels; the trainer's
    :class:`~.partial_fc.PartialFC` turns them into the loss and the embeddings' gradient.
    Eval returns the embeddings either way.
    """

    @configurable
    def __init__(self, *, pfc_enabled: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pfc_enabled = pfc_enabled

    @classmethod
    def from_config(cls, cfg) -> dict:
        kwargs = super().from_config(cfg)
        pfc = cfg.MODEL.HEADS.get("PFC", None)
        kwargs["pfc_enabled"] = bool(pfc is not None and pfc.ENABLED)
        return kwargs

    def forward(self, batched_inputs: Mapping[str, Any] | torch.Tensor):
        if not (self.training and self.pfc_enabled):
            return super().forward(batched_inputs)
        features = self.backbone(self.preprocess_image(batched_inputs))
        targets = self.training_targets(batched_inputs)
        embeddings = self.heads(features, targets)
        if embeddings.dtype in (torch.float16, torch.bfloat16):  # autocast: the classifier runs in float32
            embeddings = embeddings.float()
        return embeddings, targets


register_once(META_ARCH_REGISTRY, FaceBaseline)
