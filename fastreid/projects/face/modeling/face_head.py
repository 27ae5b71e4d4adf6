"""``FaceHead``: :class:`EmbeddingHead` whose classifier lives outside the model when Partial FC
trains it (upstream FastFace's head)."""

from __future__ import annotations

import torch

from fastreid.config import configurable
from fastreid.modeling.heads import REID_HEADS_REGISTRY, EmbeddingHead

from ...registration import register_once

__all__ = ["FaceHead"]


class FaceHead(EmbeddingHead):
    """With ``MODEL.HEADS.PFC.ENABLED`` the head has no ``weight`` (the class centres are the
    :class:`~.partial_fc.PartialFC` module's, sharded across processes) and returns the
    N x D embedding after the neck, in training as in eval; otherwise it is ``EmbeddingHead``."""

    @configurable
    def __init__(self, *, pfc_enabled: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.pfc_enabled = pfc_enabled
        if pfc_enabled:
            del self.weight  # the class centres live in PartialFC

    @classmethod
    def from_config(cls, cfg) -> dict:
        kwargs = super().from_config(cfg)
        pfc = cfg.MODEL.HEADS.get("PFC", None)
        kwargs["pfc_enabled"] = bool(pfc is not None and pfc.ENABLED)
        return kwargs

    def forward(self, features: torch.Tensor, targets: torch.Tensor | None = None):
        if not self.pfc_enabled:
            return super().forward(features, targets)
        return self.bottleneck(self.pool_layer(features))[..., 0, 0]


register_once(REID_HEADS_REGISTRY, FaceHead)
