"""Classifier output layers selected by ``MODEL.HEADS.CLS_LAYER``.

They turn the class logits (``Linear``) or cosine similarities (the others) into the logits fed
to the cross-entropy loss, adding the margin ``m`` to the target class and scaling by ``s``.
They hold no parameters, so they add no state-dict keys.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["Linear", "CosSoftmax", "ArcSoftmax", "CircleSoftmax", "CLS_LAYERS", "build_cls_layer"]


class _AnySoftmax(nn.Module):
    def __init__(self, num_classes: int, scale: float, margin: float) -> None:
        super().__init__()
        self._num_classes = num_classes
        self.s = scale
        self.m = margin

    def extra_repr(self) -> str:
        return f"num_classes={self._num_classes}, scale={self.s}, margin={self.m}"


class Linear(_AnySoftmax):
    """Plain logits (scale 1, no margin)."""

    def __init__(self, num_classes: int, scale: float = 1, margin: float = 0) -> None:
        super().__init__(num_classes, 1, 0)

    def forward(self, logits: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        return logits


class CosSoftmax(_AnySoftmax):
    """Large-margin cosine (CosFace): ``s * (cos - m)`` for the target, ``s * cos`` otherwise."""

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        one_hot = F.one_hot(targets, num_classes=self._num_classes).to(logits.dtype)
        return (logits - self.m * one_hot) * self.s


class ArcSoftmax(_AnySoftmax):
    """Additive angular margin (ArcFace): ``s * cos(theta + m)`` for the target class."""

    def __init__(self, num_classes: int, scale: float, margin: float) -> None:
        super().__init__(num_classes, scale, margin)
        self.cos_m = math.cos(margin)
        self.sin_m = math.sin(margin)
        self.threshold = math.cos(math.pi - margin)
        self.mm = math.sin(math.pi - margin) * margin

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        sine = torch.sqrt((1.0 - logits.pow(2)).clamp(min=0.0))
        phi = logits * self.cos_m - sine * self.sin_m
        # Past theta = pi - m, cos(theta + m) is no longer decreasing: use a linear penalty instead.
        phi = torch.where(logits > self.threshold, phi, logits - self.mm)
        one_hot = F.one_hot(targets, num_classes=self._num_classes).to(logits.dtype)
        return (one_hot * phi + (1.0 - one_hot) * logits) * self.s


class CircleSoftmax(_AnySoftmax):
    """Circle-loss logits (Sun et al., 2020) with self-paced weights ``alpha_p``/``alpha_n``."""

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        alpha_p = torch.clamp_min(-logits.detach() + 1 + self.m, min=0.0)
        alpha_n = torch.clamp_min(logits.detach() + self.m, min=0.0)
        s_p = self.s * alpha_p * (logits - (1 - self.m))
        s_n = self.s * alpha_n * (logits - self.m)
        one_hot = F.one_hot(targets, num_classes=self._num_classes).to(logits.dtype)
        return one_hot * s_p + (1.0 - one_hot) * s_n


CLS_LAYERS: dict[str, type[_AnySoftmax]] = {
    cls.__name__: cls for cls in (Linear, CosSoftmax, ArcSoftmax, CircleSoftmax)
}


def build_cls_layer(name: str, num_classes: int, scale: float, margin: float) -> _AnySoftmax:
    """The classifier layer ``name`` (case-insensitive: old configs say "linear", "circleSoftmax")."""
    lookup = {key.lower(): key for key in CLS_LAYERS}
    key = lookup.get(name.lower())
    if key is None:
        raise ValueError(
            f"MODEL.HEADS.CLS_LAYER {name!r} is unknown; expected one of {', '.join(CLS_LAYERS)}"
        )
    return CLS_LAYERS[key](num_classes, scale, margin)
