"""A Baseline that hands its features to an outside classifier, and that classifier."""

import torch
import torch.nn.functional as F
from torch import nn

from fastreid.config import configurable
from fastreid.modeling.meta_arch import Baseline
from fastreid.modeling.meta_arch.build import META_ARCH_REGISTRY


@META_ARCH_REGISTRY.register()
class TinyFaceBaseline(Baseline):
    """With the outside classifier on, training returns ``(features, targets)``; otherwise as Baseline."""

    @configurable
    def __init__(self, **kwargs):
        self.pfc_enabled = kwargs.pop("pfc_enabled")
        super().__init__(**kwargs)

    @classmethod
    def from_config(cls, cfg):
        kwargs = super().from_config(cfg)
        kwargs["pfc_enabled"] = cfg.MODEL.HEADS.PFC.ENABLED
        return kwargs

    def forward(self, batched_inputs):
        if not (self.training and self.pfc_enabled):
            return super().forward(batched_inputs)
        features = self.backbone(self.preprocess_image(batched_inputs))
        targets = self.training_targets(batched_inputs)
        return self.heads(features, targets)["features"], targets


class CosineClassifier(nn.Module):
    """A scaled cosine classifier that computes its loss and the gradient for the features."""

    def __init__(self, dim, num_classes, scale):
        super().__init__()
        self.scale = scale
        self.weight = nn.Parameter(torch.randn(num_classes, dim) * 0.01)
        self.weight_mom = torch.zeros_like(self.weight)

    def forward_backward(self, features, targets, optimizer):
        features = features.detach().requires_grad_(True)
        logits = F.linear(F.normalize(features), F.normalize(self.weight)) * self.scale
        loss = F.cross_entropy(logits, targets)
        loss.backward()
        return features.grad, loss.detach()

    def update(self):
        with torch.no_grad():
            self.weight_mom.mul_(0.9).add_(self.weight)
