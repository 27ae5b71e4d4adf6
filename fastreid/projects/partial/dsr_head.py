"""``DSRHead``: the deep spatial feature reconstruction head (upstream PartialReID's ``dsr_head``).

From the backbone's feature map (``N x C x H x W``) it takes the spatial features: max-pooled with
windows 2, 4, 6 and 8 (stride 2) and concatenated, ``N x C x m`` (a 24 x 8 map gives m = 48 + 33
+ 20 + 9 = 110). The occlusion unit scores every position (a linear layer and a sigmoid): the
scores of the finest pooling, L1-normalised, weight its positions into the *foreground feature*;
all scores, L1-normalised, are the positions' weights in the DSR distance.

Training: ``EmbeddingHead``'s global branch (pooling, BNNeck, classifier ``weight``) and the
foreground branch (``bnneck_occ``, classifier ``weight_occ``): ``cls_outputs``,
``fore_cls_outputs``, ``pred_class_logits``, ``features`` (global, before the neck) and
``foreground_features`` (before its neck), as upstream. Eval: ``(foreground feature after its
neck, spatial features, position scores)``, what :class:`~.dsr_evaluation.DsrEvaluator` takes.
State-dict keys are upstream's (``occ_unit.mask_layer.*``, ``bnneck_occ.*``, ``weight_occ`` next
to ``EmbeddingHead``'s).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from fastreid.layers import get_norm, weights_init_kaiming
from fastreid.layers.any_softmax import Linear
from fastreid.modeling.heads import REID_HEADS_REGISTRY, EmbeddingHead

from ..registration import register_once

__all__ = ["DSRHead", "OcclusionUnit", "spatial_features", "POOL_SIZES", "MIN_FEATURE_SIZE"]

#: The max-pooling windows of the spatial features (stride 2 each).
POOL_SIZES = (2, 4, 6, 8)
#: The smallest feature map (both sides) the largest window fits.
MIN_FEATURE_SIZE = max(POOL_SIZES)


def _check_size(features: torch.Tensor) -> None:
    h, w = features.shape[-2:]
    if h < MIN_FEATURE_SIZE or w < MIN_FEATURE_SIZE:
        raise ValueError(
            f"DSRHead pools the feature map with windows up to {MIN_FEATURE_SIZE} x {MIN_FEATURE_SIZE} but the "
            f"backbone gives {h} x {w}: use larger images (INPUT.SIZE_TRAIN / SIZE_TEST, e.g. [256, 128] with "
            "MODEL.BACKBONE.LAST_STRIDE 1: a 16 x 8 map)"
        )


def spatial_features(features: torch.Tensor, pools: Sequence[nn.Module]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(all, finest)``: the pooled positions of every window concatenated (``N x C x m``) and
    those of the finest window (``N x C x h x w``)."""
    _check_size(features)
    pooled = [pool(features) for pool in pools]
    return torch.cat([p.flatten(2) for p in pooled], dim=2), pooled[0]


class OcclusionUnit(nn.Module):
    """Scores each pooled position as foreground (``mask_layer``: C -> 1, then a sigmoid).
    Returns the foreground feature (``N x C x 1 x 1``: the finest positions weighted by their
    L1-normalised scores), the scores (``N x m``) and the scores L1-normalised over all positions."""

    def __init__(self, in_planes: int = 2048) -> None:
        super().__init__()
        # upstream's attribute names (they hold no weights, so the state dict has no key of them)
        self.MaxPool1 = nn.MaxPool2d(kernel_size=2, stride=2, padding=0)
        self.MaxPool2 = nn.MaxPool2d(kernel_size=4, stride=2, padding=0)
        self.MaxPool3 = nn.MaxPool2d(kernel_size=6, stride=2, padding=0)
        self.MaxPool4 = nn.MaxPool2d(kernel_size=8, stride=2, padding=0)
        self.mask_layer = nn.Linear(in_planes, 1, bias=True)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        pools = (self.MaxPool1, self.MaxPool2, self.MaxPool3, self.MaxPool4)
        all_positions, finest = spatial_features(x, pools)
        mask_weight = torch.sigmoid(self.mask_layer(all_positions.transpose(1, 2))[..., 0])  # N x m
        num_finest = finest.shape[2] * finest.shape[3]
        mask_score = F.normalize(mask_weight[:, :num_finest], p=1, dim=1).unsqueeze(1)  # N x 1 x hw
        mask_weight_norm = F.normalize(mask_weight, p=1, dim=1)
        fine = finest.flatten(2).transpose(1, 2)  # N x hw x C
        foreground = mask_score.matmul(fine).view(fine.shape[0], -1, 1, 1)
        return foreground, mask_weight, mask_weight_norm


class DSRHead(EmbeddingHead):
    """See the module docstring. Config: ``MODEL.BACKBONE.FEAT_DIM``, ``MODEL.HEADS.*`` as
    :class:`EmbeddingHead` (``EMBEDDING_DIM``, ``WITH_BNNECK``, ``NORM``, ``NUM_CLASSES``,
    ``CLS_LAYER``, ...)."""

    def __init__(self, cfg) -> None:
        super().__init__(cfg)
        feat_dim = cfg.MODEL.BACKBONE.FEAT_DIM
        heads = cfg.MODEL.HEADS
        self.occ_unit = OcclusionUnit(in_planes=feat_dim)
        # upstream's attribute names (no weights)
        self.MaxPool1 = nn.MaxPool2d(kernel_size=2, stride=2, padding=0)
        self.MaxPool2 = nn.MaxPool2d(kernel_size=4, stride=2, padding=0)
        self.MaxPool3 = nn.MaxPool2d(kernel_size=6, stride=2, padding=0)
        self.MaxPool4 = nn.MaxPool2d(kernel_size=8, stride=2, padding=0)

        occ_neck: list[nn.Module] = []
        if heads.EMBEDDING_DIM > 0:
            occ_neck.append(nn.Conv2d(feat_dim, heads.EMBEDDING_DIM, 1, 1, bias=False))
            feat_dim = heads.EMBEDDING_DIM
        if heads.WITH_BNNECK:
            occ_neck.append(get_norm(heads.NORM, feat_dim, bias_freeze=True))
        self.bnneck_occ = nn.Sequential(*occ_neck)
        self.bnneck_occ.apply(weights_init_kaiming)
        self.weight_occ = nn.Parameter(torch.normal(0, 0.01, (heads.NUM_CLASSES, feat_dim)))

    def _logits(self, feat: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        if type(self.cls_layer) is Linear:  # the margin layers subclass Linear and take cosines
            return F.linear(feat, weight)
        return F.linear(F.normalize(feat), F.normalize(weight))

    def forward(self, features: torch.Tensor, targets: torch.Tensor | None = None):
        pools = (self.MaxPool1, self.MaxPool2, self.MaxPool3, self.MaxPool4)
        all_positions, _ = spatial_features(features, pools)
        foreground, _, mask_weight_norm = self.occ_unit(features)
        bn_foreground = self.bnneck_occ(foreground)[..., 0, 0]
        if not self.training:
            return bn_foreground, all_positions, mask_weight_norm

        if self.num_classes <= 0:
            raise ValueError(
                "MODEL.HEADS.NUM_CLASSES is 0, so the classifier has no classes to train; "
                "set it to the number of training identities (the trainer does so from the data)"
            )
        if targets is None:
            raise ValueError("DSRHead needs the targets in training mode")
        global_feat = self.pool_layer(features)
        bn_feat = self.bottleneck(global_feat)[..., 0, 0]
        logits = self._logits(bn_feat, self.weight)
        fore_logits = self._logits(bn_foreground, self.weight_occ)
        return {
            "cls_outputs": self.cls_layer(logits, targets),
            "fore_cls_outputs": self.cls_layer(fore_logits, targets),
            "pred_class_logits": logits * self.cls_layer.s,
            "features": global_feat[..., 0, 0],
            "foreground_features": foreground[..., 0, 0],
        }


register_once(REID_HEADS_REGISTRY, DSRHead)
