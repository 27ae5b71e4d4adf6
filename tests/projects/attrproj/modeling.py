"""The project's head (in REID_HEADS_REGISTRY), meta-architecture (in META_ARCH_REGISTRY) and loss."""

import torch
import torch.nn.functional as F
from torch import nn

from fastreid.layers.weight_init import weights_init_kaiming
from fastreid.modeling.heads import EmbeddingHead
from fastreid.modeling.heads.build import REID_HEADS_REGISTRY
from fastreid.modeling.meta_arch.baseline import Baseline
from fastreid.modeling.meta_arch.build import META_ARCH_REGISTRY


def weighted_bce_loss(logits, targets, sample_weights=None):
    """Binary cross-entropy over attributes; rare attributes weigh more when ``sample_weights``
    (how often each attribute is on) is given."""
    targets = targets.float()
    if sample_weights is None:
        return F.binary_cross_entropy_with_logits(logits, targets)
    weights = torch.where(targets > 0.5, torch.exp(1.0 - sample_weights), torch.exp(sample_weights))
    return F.binary_cross_entropy_with_logits(logits, targets, weight=weights)


@REID_HEADS_REGISTRY.register()
class TinyAttrHead(EmbeddingHead):
    """EmbeddingHead's pooling and neck, one logit per attribute; sigmoid scores in eval."""

    def __init__(self, cfg):
        super().__init__(cfg)
        self.bnneck = nn.BatchNorm1d(cfg.MODEL.HEADS.NUM_CLASSES)
        self.bnneck.apply(weights_init_kaiming)

    def forward(self, features, targets=None):
        neck = self.bottleneck(self.pool_layer(features)).flatten(1)
        logits = self.bnneck(F.linear(neck, self.weight))
        if not self.training:
            return torch.sigmoid(logits)
        return {"cls_outputs": logits}


@META_ARCH_REGISTRY.register()
class TinyAttrBaseline(Baseline):
    sample_weights = None

    @classmethod
    def from_config(cls, cfg):
        kwargs = Baseline.from_config(cfg)
        kwargs["loss_kwargs"].update({"bce": {"scale": cfg.MODEL.LOSSES.BCE.SCALE}})
        return kwargs

    def losses(self, outputs, gt_labels):
        loss_dict = {}
        if "BinaryCrossEntropyLoss" in self.loss_kwargs["loss_names"]:
            scale = self.loss_kwargs["bce"]["scale"]
            loss_dict["loss_bce"] = (
                weighted_bce_loss(outputs["cls_outputs"], gt_labels, self.sample_weights) * scale
            )
        return loss_dict
