"""Colour jitter (brightness, contrast, saturation, hue) on uint8 tensors, seeded."""

from __future__ import annotations

import torch
import torchvision.transforms.v2.functional as F

from .draws import chance, uniform

__all__ = ["ColorJitter"]


class ColorJitter:
    """Brightness, contrast, saturation and hue jitter in random order, applied with ``prob``."""

    def __init__(
        self,
        brightness: float = 0.0,
        contrast: float = 0.0,
        saturation: float = 0.0,
        hue: float = 0.0,
        prob: float = 1.0,
    ):
        self.brightness, self.contrast, self.saturation = (
            float(brightness),
            float(contrast),
            float(saturation),
        )
        self.hue = float(hue)
        if not 0 <= self.hue <= 0.5:
            raise ValueError(f"INPUT.CJ.HUE must be in [0, 0.5], got {hue}")
        self.prob = float(prob)

    def __call__(self, img: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        if not chance(g, self.prob):
            return img
        order = torch.randperm(4, generator=g).tolist()
        b, c, s, h = self.brightness, self.contrast, self.saturation, self.hue
        for op in order:
            if op == 0 and b > 0:
                img = F.adjust_brightness(img, uniform(g, max(0.0, 1 - b), 1 + b))
            elif op == 1 and c > 0:
                img = F.adjust_contrast(img, uniform(g, max(0.0, 1 - c), 1 + c))
            elif op == 2 and s > 0:
                img = F.adjust_saturation(img, uniform(g, max(0.0, 1 - s), 1 + s))
            elif op == 3 and h > 0:
                img = F.adjust_hue(img, uniform(g, -h, h))
        return img

    def __repr__(self) -> str:
        return (
            f"ColorJitter(brightness={self.brightness}, contrast={self.contrast}, "
            f"saturation={self.saturation}, hue={self.hue}, prob={self.prob})"
        )
