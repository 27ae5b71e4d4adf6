"""ClasHead: upstream FastReID's classification head (its FastClas project and image
classification configs). Same parameters and keys as ``EmbeddingHead``; eval returns the scaled
class logits instead of the embedding, and the metric losses see the feature after the neck."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from fastreid.layers.any_softmax import Linear

from .build import HEADS_REGISTRY
from .embedding_head import EmbeddingHead

__all__ = ["ClasHead"]


@HEADS_REGISTRY.register()
class ClasHead(EmbeddingHead):
    def forward(self, features: torch.Tensor, targets: torch.Tensor | None = None):
        neck_feat = self.bottleneck(self.pool_layer(features)).flatten(1)
        if type(self.cls_layer) is Linear:  # the margin layers subclass Linear and take cosines
            logits = F.linear(neck_feat, self.weight)
        else:
            logits = F.linear(F.normalize(neck_feat), F.normalize(self.weight))
        if not self.training:
            return logits * self.cls_layer.s
        if targets is None:
            raise ValueError("ClasHead needs the targets in training mode")
        return {
            "cls_outputs": self.cls_layer(logits, targets),
            "pred_class_logits": logits * self.cls_layer.s,
            "features": neck_feat,
        }
