"""EmbeddingHead: pooling, optional embedding conv and BNNeck, and the classifier weight.

State-dict keys (upstream's): ``pool_layer.p`` (GeM-P only), ``bottleneck.0.*`` (the 1x1
embedding conv when ``EMBEDDING_DIM > 0``, else the BNNeck), ``bottleneck.1.*`` (the BNNeck
after an embedding conv) and ``weight`` (NUM_CLASSES x feature dim).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from fastreid.config import ConfigError, configurable
from fastreid.layers import build_cls_layer, build_pooling, get_norm, weights_init_kaiming
from fastreid.layers.any_softmax import Linear

from .build import HEADS_REGISTRY

__all__ = ["EmbeddingHead"]


@HEADS_REGISTRY.register()
class EmbeddingHead(nn.Module):
    """Eval: returns the N x D feature after the neck. Training: returns ``cls_outputs`` (logits
    with margin and scale, for cross-entropy), ``pred_class_logits`` (scaled logits without
    margin, for accuracy) and ``features`` (before or after the BNNeck, per ``NECK_FEAT``, for the
    metric losses)."""

    @configurable
    def __init__(
        self,
        *,
        feat_dim: int,
        embedding_dim: int,
        num_classes: int,
        neck_feat: str,
        pool_type: str,
        cls_type: str,
        scale: float,
        margin: float,
        with_bnneck: bool,
        norm_type: str,
    ) -> None:
        super().__init__()
        if neck_feat not in ("before", "after"):
            raise ConfigError(f"MODEL.HEADS.NECK_FEAT must be 'before' or 'after', got {neck_feat!r}")
        self.pool_layer = build_pooling(pool_type)
        self.neck_feat = neck_feat

        neck: list[nn.Module] = []
        if embedding_dim > 0:
            neck.append(nn.Conv2d(feat_dim, embedding_dim, 1, 1, bias=False))
            feat_dim = embedding_dim
        if with_bnneck:
            neck.append(get_norm(norm_type, feat_dim, bias_freeze=True))
        self.bottleneck = nn.Sequential(*neck)

        self.num_classes = num_classes
        self.weight = nn.Parameter(torch.empty(num_classes, feat_dim))
        self.cls_layer = build_cls_layer(cls_type, num_classes, scale, margin)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.bottleneck.apply(weights_init_kaiming)
        nn.init.normal_(self.weight, std=0.01)

    @classmethod
    def from_config(cls, cfg) -> dict:
        heads = cfg.MODEL.HEADS
        return {
            "feat_dim": cfg.MODEL.BACKBONE.FEAT_DIM,
            "embedding_dim": heads.EMBEDDING_DIM,
            "num_classes": heads.NUM_CLASSES,
            "neck_feat": heads.NECK_FEAT,
            "pool_type": heads.POOL_LAYER,
            "cls_type": heads.CLS_LAYER,
            "scale": heads.SCALE,
            "margin": heads.MARGIN,
            "with_bnneck": heads.WITH_BNNECK,
            "norm_type": heads.NORM,
        }

    def forward(self, features: torch.Tensor, targets: torch.Tensor | None = None):
        pool_feat = self.pool_layer(features)
        neck_feat = self.bottleneck(pool_feat)[..., 0, 0]
        if not self.training:
            return neck_feat

        if self.num_classes <= 0:
            raise ValueError(
                "MODEL.HEADS.NUM_CLASSES is 0, so the classifier has no classes to train; "
                "set it to the number of training identities (the trainer does so from the data)"
            )
        if targets is None:
            raise ValueError("EmbeddingHead needs the targets in training mode")
        if type(self.cls_layer) is Linear:  # the margin layers subclass Linear and take cosines
            logits = F.linear(neck_feat, self.weight)
        else:
            logits = F.linear(F.normalize(neck_feat), F.normalize(self.weight))
        cls_outputs = self.cls_layer(logits, targets)
        feat = pool_feat[..., 0, 0] if self.neck_feat == "before" else neck_feat
        return {
            "cls_outputs": cls_outputs,
            "pred_class_logits": logits.mul(self.cls_layer.s),
            "features": feat,
        }
