"""AutoAugment (torchvision's ImageNet policy) and AugMix, with the operations they share."""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
import torch
import torchvision.transforms.v2.functional as F
from torchvision.transforms import InterpolationMode

from .draws import chance, numpy_rng, randint

__all__ = ["apply_op", "AutoAugment", "AugMix"]


def _shift(
    img: torch.Tensor, fill: int, translate: list[int], shear: list[float], center: Optional[list[int]] = None
) -> torch.Tensor:
    """An affine map with no rotation or scaling: a translation or a shear (``center`` None: the
    image centre)."""
    return F.affine(
        img,
        angle=0.0,
        translate=translate,
        scale=1.0,
        shear=shear,
        interpolation=InterpolationMode.NEAREST,
        fill=fill,
        center=center,
    )


def apply_op(img: torch.Tensor, name: str, magnitude: float, fill: int = 128) -> torch.Tensor:
    """One AutoAugment / AugMix operation on a uint8 image (torchvision's op names)."""
    nearest = InterpolationMode.NEAREST
    if name in ("ShearX", "ShearY"):  # sheared about the top-left corner, as torchvision
        angle = math.degrees(math.atan(magnitude))
        shear = [angle, 0.0] if name == "ShearX" else [0.0, angle]
        return _shift(img, fill, [0, 0], shear, center=[0, 0])
    if name == "TranslateX":
        return _shift(img, fill, [int(magnitude), 0], [0.0, 0.0])
    if name == "TranslateY":
        return _shift(img, fill, [0, int(magnitude)], [0.0, 0.0])
    if name == "Rotate":
        return F.rotate(img, magnitude, interpolation=nearest, fill=fill)
    if name == "Brightness":
        return F.adjust_brightness(img, 1.0 + magnitude)
    if name == "Color":
        return F.adjust_saturation(img, 1.0 + magnitude)
    if name == "Contrast":
        return F.adjust_contrast(img, 1.0 + magnitude)
    if name == "Sharpness":
        return F.adjust_sharpness(img, 1.0 + magnitude)
    if name == "Posterize":
        return F.posterize(img, int(magnitude))
    if name == "Solarize":
        return F.solarize(img, float(magnitude))
    if name == "AutoContrast":
        return F.autocontrast(img)
    if name == "Equalize":
        return F.equalize(img)
    if name == "Invert":
        return F.invert(img)
    if name == "Identity":
        return img
    raise ValueError(f"unknown augmentation op {name!r}")


_SIGNED = {
    "ShearX",
    "ShearY",
    "TranslateX",
    "TranslateY",
    "Rotate",
    "Brightness",
    "Color",
    "Contrast",
    "Sharpness",
}


def _magnitudes(num_bins: int, height: int, width: int) -> dict[str, torch.Tensor]:
    """Magnitude bins of each op (the AutoAugment paper's ranges, as torchvision uses them)."""
    zeros = torch.zeros(num_bins)
    return {
        "ShearX": torch.linspace(0.0, 0.3, num_bins),
        "ShearY": torch.linspace(0.0, 0.3, num_bins),
        "TranslateX": torch.linspace(0.0, 150.0 / 331.0 * width, num_bins),
        "TranslateY": torch.linspace(0.0, 150.0 / 331.0 * height, num_bins),
        "Rotate": torch.linspace(0.0, 30.0, num_bins),
        "Brightness": torch.linspace(0.0, 0.9, num_bins),
        "Color": torch.linspace(0.0, 0.9, num_bins),
        "Contrast": torch.linspace(0.0, 0.9, num_bins),
        "Sharpness": torch.linspace(0.0, 0.9, num_bins),
        "Posterize": 8 - (torch.arange(num_bins) / ((num_bins - 1) / 4)).round().int(),
        "Solarize": torch.linspace(255.0, 0.0, num_bins),
        "AutoContrast": zeros,
        "Equalize": zeros,
        "Invert": zeros,
    }


class AutoAugment:
    """AutoAugment's ImageNet policy, applied with probability ``prob``.

    The sub-policies are torchvision's (``torchvision.transforms.AutoAugment``); the sub-policy,
    each op's application and the sign of its magnitude are drawn from ``g``.
    """

    NUM_BINS = 10

    def __init__(self, prob: float = 1.0, fill: int = 128):
        from torchvision.transforms import AutoAugment as TVAutoAugment
        from torchvision.transforms import AutoAugmentPolicy

        self.policies = list(TVAutoAugment(AutoAugmentPolicy.IMAGENET).policies)
        self.prob = float(prob)
        self.fill = fill

    def __call__(self, img: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        if not chance(g, self.prob):
            return img
        mags = _magnitudes(self.NUM_BINS, img.shape[-2], img.shape[-1])
        policy = self.policies[randint(g, 0, len(self.policies) - 1)]
        for name, p, bin_index in policy:
            apply_now = chance(g, p)
            negative = chance(g, 0.5)
            if not apply_now:
                continue
            magnitude = float(mags[name][bin_index]) if bin_index is not None else 0.0
            if negative and name in _SIGNED:
                magnitude = -magnitude
            img = apply_op(img, name, magnitude, self.fill)
        return img

    def __repr__(self) -> str:
        return f"AutoAugment(policy=imagenet, prob={self.prob})"


class AugMix:
    """AugMix (Hendrycks et al., 2020) with upstream's re-ID op list, applied with ``prob``.

    ``width`` chains of 1-3 ops (or ``depth``) are mixed with Dirichlet weights and blended
    with the original by a Beta(1, 1) factor. Colour-changing ops are left out, as upstream.
    """

    OPS = (
        "AutoContrast",
        "Equalize",
        "Posterize",
        "Rotate",
        "Solarize",
        "ShearX",
        "ShearY",
        "TranslateX",
        "TranslateY",
    )

    def __init__(
        self, prob: float = 0.5, width: int = 3, depth: int = -1, severity: int = 1, alpha: float = 1.0
    ):
        self.prob, self.width, self.depth, self.severity, self.alpha = (
            float(prob),
            width,
            depth,
            severity,
            alpha,
        )

    def _magnitude(self, name: str, level: float, height: int, width: int) -> float:
        x = level / 10.0
        return {
            "Posterize": 4 - int(x * 4),
            "Rotate": 30.0 * x,
            "Solarize": 256 - 256 * x,
            "ShearX": 0.3 * x,
            "ShearY": 0.3 * x,
            "TranslateX": width / 3 * x,
            "TranslateY": height / 3 * x,
        }.get(name, 0.0)

    def __call__(self, img: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        if not chance(g, self.prob):
            return img
        rng = numpy_rng(g)
        ws = rng.dirichlet([self.alpha] * self.width).astype(np.float32)
        m = float(rng.beta(self.alpha, self.alpha))
        mix = torch.zeros(img.shape, dtype=torch.float32)
        h, w = img.shape[-2], img.shape[-1]
        for i in range(self.width):
            aug = img
            depth = self.depth if self.depth > 0 else int(rng.integers(1, 4))
            for _ in range(depth):
                name = self.OPS[int(rng.integers(len(self.OPS)))]
                magnitude = self._magnitude(name, rng.uniform(0.1, self.severity), h, w)
                if name not in ("Posterize", "Solarize") and rng.random() < 0.5:
                    magnitude = -magnitude
                if name == "Posterize":
                    magnitude = max(1, int(magnitude))
                aug = apply_op(aug, name, magnitude, fill=0)
            mix += float(ws[i]) * aug.float()
        mixed = (1 - m) * img.float() + m * mix
        return mixed.round_().clamp_(0, 255).to(torch.uint8)

    def __repr__(self) -> str:
        return f"AugMix(prob={self.prob}, width={self.width}, depth={self.depth}, severity={self.severity})"
