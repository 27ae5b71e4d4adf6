"""``AttrHead``: one logit per attribute (upstream FastAttr's head)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from fastreid.layers import weights_init_kaiming
from fastreid.modeling.heads import REID_HEADS_REGISTRY, EmbeddingHead

from ...registration import register_once

__all__ = ["AttrHead"]


class AttrHead(EmbeddingHead):
    """:class:`EmbeddingHead`'s pooling, neck and classifier weight (``MODEL.HEADS.NUM_CLASSES``
    rows, one per attribute), then a BatchNorm over the logits (``bnneck``).

    Training: ``{"cls_outputs": logits}`` (N x C). Eval: ``sigmoid(logits)``, the N x C scores
    the evaluator thresholds at ``TEST.THRES``. State-dict keys are upstream's
    (``pool_layer``, ``bottleneck``, ``weight``, ``bnneck``).
    """

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        num_classes = cfg.MODEL.HEADS.NUM_CLASSES
        self.bnneck = nn.BatchNorm1d(num_classes)
        self.bnneck.apply(weights_init_kaiming)

    def forward(self, features: torch.Tensor, targets: torch.Tensor | None = None):
        neck_feat = self.bottleneck(self.pool_layer(features)).flatten(1)
        logits = self.bnneck(F.linear(neck_feat, self.weight))
        if not self.training:
            return torch.sigmoid(logits)
        return {"cls_outputs": logits}


register_once(REID_HEADS_REGISTRY, AttrHead)
