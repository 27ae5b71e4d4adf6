"""Classifier output layers selected by ``MODEL.HEADS.CLS_LAYER`` (upstream FastReID's classes).

They turn the class logits (``Linear``) or cosine similarities (the others) into the logits fed
to the cross-entropy loss: the margin ``m`` goes to the target class and everything is scaled by
``s``. A target of -1 (a sample whose class lives on another process, with model-parallel
classifiers) gets no margin. They hold no parameters, so they add no state-dict keys, and they
return a new tensor (upstream's work in place on the logits they are given).

``ArcSoftmax`` differs from upstream's ``cos(acos(c) + m)`` where that is ill-behaved: past
``theta = pi - m`` the target logit uses the linear penalty ``c - m sin(m)`` (so it keeps
decreasing with the angle, as in ArcFace's reference code), and ``acos`` never sees a cosine that
rounding pushed past 1 (upstream's gives NaN there). Elsewhere the values are upstream's.
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["Linear", "CosSoftmax", "ArcSoftmax", "CircleSoftmax", "CLS_LAYERS", "build_cls_layer"]


def _target_mask(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """1 at each row's target class, 0 elsewhere and on rows whose target is -1."""
    mask = torch.zeros_like(logits)
    rows = torch.nonzero(targets != -1).flatten()
    mask[rows, targets[rows]] = 1
    return mask


class Linear(nn.Module):
    """Plain logits times ``scale`` (no margin)."""

    def __init__(self, num_classes: int, scale: float = 1, margin: float = 0) -> None:
        super().__init__()
        self.num_classes = num_classes
        self.s = scale
        self.m = margin

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return logits * self.s

    def extra_repr(self) -> str:
        return f"num_classes={self.num_classes}, scale={self.s}, margin={self.m}"


class CosSoftmax(Linear):
    """Large-margin cosine (CosFace): ``s * (cos - m)`` for the target, ``s * cos`` otherwise."""

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return (logits - self.m * _target_mask(logits, targets)) * self.s


class ArcSoftmax(Linear):
    """Additive angular margin (ArcFace): ``s * cos(theta + m)`` for the target class."""

    def __init__(self, num_classes: int, scale: float = 1, margin: float = 0) -> None:
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
        mask = _target_mask(logits, targets)
        return (mask * phi + (1.0 - mask) * logits) * self.s


class CircleSoftmax(Linear):
    """Circle-loss logits (Sun et al., 2020) with self-paced weights ``alpha_p``/``alpha_n``."""

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        alpha_p = torch.clamp_min(-logits.detach() + 1 + self.m, min=0.0)
        alpha_n = torch.clamp_min(logits.detach() + self.m, min=0.0)
        s_p = self.s * alpha_p * (logits - (1 - self.m))
        s_n = self.s * alpha_n * (logits - self.m)
        mask = _target_mask(logits, targets)
        return mask * s_p + (1.0 - mask) * s_n


CLS_LAYERS: dict[str, type[Linear]] = {
    cls.__name__: cls for cls in (Linear, CosSoftmax, ArcSoftmax, CircleSoftmax)
}


def build_cls_layer(name: str, num_classes: int, scale: float, margin: float) -> Linear:
    """The classifier layer ``name`` (case-insensitive: old configs say "linear", "circleSoftmax")."""
    lookup = {key.lower(): key for key in CLS_LAYERS}
    key = lookup.get(name.lower())
    if key is None:
        raise ValueError(
            f"MODEL.HEADS.CLS_LAYER {name!r} is unknown; expected one of {', '.join(CLS_LAYERS)}"
        )
    return CLS_LAYERS[key](num_classes, scale, margin)
