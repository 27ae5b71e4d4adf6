"""Geometric transforms: resize, crops, flip, pad + random crop, affine (uint8 tensors, seeded)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Optional, Union

import torch
import torchvision.transforms.v2.functional as F
from torchvision.transforms import InterpolationMode

from .draws import chance, randint, uniform

__all__ = [
    "Size",
    "Resize",
    "CenterCrop",
    "RandomResizedCrop",
    "RandomHorizontalFlip",
    "PadRandomCrop",
    "RandomAffine",
]

Size = Union[int, Sequence[int]]


def _pair(size: Size) -> list[int]:
    if isinstance(size, int):
        return [size, size]
    size = [int(s) for s in size]
    return size * 2 if len(size) == 1 else size[:2]


class Resize:
    """Resize to ``size`` ([h, w]; an int resizes the shorter side), bicubic like upstream."""

    def __init__(self, size: Size, interpolation: InterpolationMode = InterpolationMode.BICUBIC):
        self.size = [int(size)] if isinstance(size, int) else [int(v) for v in size][:2]
        self.interpolation = interpolation

    def __call__(
        self, img: torch.Tensor, g: Optional[torch.Generator]
    ) -> torch.Tensor:  # deterministic: g unused
        if len(self.size) == 2 and list(img.shape[-2:]) == self.size:
            return img
        return F.resize(img, self.size, interpolation=self.interpolation, antialias=True)

    def __repr__(self) -> str:
        return f"Resize(size={self.size}, interpolation={self.interpolation.value})"


class CenterCrop:
    def __init__(self, size: Size):
        self.size = _pair(size)

    def __call__(self, img: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        return F.center_crop(img, self.size)

    def __repr__(self) -> str:
        return f"CenterCrop(size={self.size})"


class RandomResizedCrop:
    """Crop a random area (``scale``) and aspect ratio (``ratio``), resize to ``size``."""

    def __init__(
        self,
        size: Size,
        scale: Sequence[float] = (0.08, 1.0),
        ratio: Sequence[float] = (3 / 4, 4 / 3),
        interpolation: InterpolationMode = InterpolationMode.BICUBIC,
    ):
        self.size = _pair(size)
        self.scale = (float(scale[0]), float(scale[1]))
        self.ratio = (float(ratio[0]), float(ratio[1]))
        self.interpolation = interpolation

    def params(self, height: int, width: int, g: torch.Generator) -> tuple[int, int, int, int]:
        area = height * width
        log_ratio = (math.log(self.ratio[0]), math.log(self.ratio[1]))
        for _ in range(10):
            target = area * uniform(g, *self.scale)
            aspect = math.exp(uniform(g, *log_ratio))
            w = int(round(math.sqrt(target * aspect)))
            h = int(round(math.sqrt(target / aspect)))
            if 0 < w <= width and 0 < h <= height:
                return randint(g, 0, height - h), randint(g, 0, width - w), h, w
        in_ratio = width / height  # fallback: the whole image, clamped to the ratio range
        if in_ratio < self.ratio[0]:
            w, h = width, int(round(width / self.ratio[0]))
        elif in_ratio > self.ratio[1]:
            h, w = height, int(round(height * self.ratio[1]))
        else:
            w, h = width, height
        return (height - h) // 2, (width - w) // 2, h, w

    def __call__(self, img: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        top, left, h, w = self.params(img.shape[-2], img.shape[-1], g)
        return F.resized_crop(
            img, top, left, h, w, self.size, interpolation=self.interpolation, antialias=True
        )

    def __repr__(self) -> str:
        return f"RandomResizedCrop(size={self.size}, scale={self.scale}, ratio={self.ratio})"


class RandomHorizontalFlip:
    def __init__(self, p: float = 0.5):
        self.p = float(p)

    def __call__(self, img: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        return img.flip(-1) if chance(g, self.p) else img

    def __repr__(self) -> str:
        return f"RandomHorizontalFlip(p={self.p})"


class PadRandomCrop:
    """``Pad(padding, mode)`` then ``RandomCrop(size)`` fused into one copy.

    With the default constant mode the crop window is copied straight into a zero canvas
    (no padded intermediate image). Other modes ("edge", "reflect", "symmetric") pad first.
    """

    def __init__(self, padding: int, size: Size, padding_mode: str = "constant", fill: int = 0):
        if padding_mode not in ("constant", "edge", "reflect", "symmetric"):
            raise ValueError(
                f"INPUT.PADDING.MODE must be constant, edge, reflect or symmetric; got {padding_mode!r}"
            )
        self.padding = int(padding)
        self.size = _pair(size)
        self.padding_mode = padding_mode
        self.fill = int(fill)

    def __call__(self, img: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        p = self.padding
        ph, pw = img.shape[-2] + 2 * p, img.shape[-1] + 2 * p
        oh, ow = self.size
        if oh > ph or ow > pw:
            raise ValueError(f"PadRandomCrop: crop {self.size} is larger than the padded image ({ph}, {pw})")
        top, left = randint(g, 0, ph - oh), randint(g, 0, pw - ow)
        if self.padding_mode != "constant":
            padded = F.pad(img, [p, p, p, p], padding_mode=self.padding_mode)
            return padded[..., top : top + oh, left : left + ow].contiguous()
        y0, x0 = top - p, left - p  # window in source coordinates
        sy0, sx0 = max(y0, 0), max(x0, 0)
        sy1, sx1 = min(y0 + oh, img.shape[-2]), min(x0 + ow, img.shape[-1])
        if sy0 == 0 and sx0 == 0 and sy1 - sy0 == oh and sx1 - sx0 == ow:
            return img[..., :oh, :ow]
        out = torch.full((img.shape[0], oh, ow), self.fill, dtype=img.dtype)
        if sy1 > sy0 and sx1 > sx0:
            out[:, sy0 - y0 : sy1 - y0, sx0 - x0 : sx1 - x0] = img[:, sy0:sy1, sx0:sx1]
        return out

    def __repr__(self) -> str:
        return f"PadRandomCrop(padding={self.padding}, size={self.size}, mode={self.padding_mode!r})"


class RandomAffine:
    """Upstream's fixed affine: rotation +-10 degrees, scale 0.9..1.1, x-shear +-0.1 degrees."""

    def __init__(
        self, degrees: float = 10.0, scale: Sequence[float] = (0.9, 1.1), shear: float = 0.1, fill: int = 0
    ):
        self.degrees, self.scale, self.shear, self.fill = float(degrees), tuple(scale), float(shear), fill

    def __call__(self, img: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        angle = uniform(g, -self.degrees, self.degrees)
        scale = uniform(g, *self.scale)
        shear = uniform(g, -self.shear, self.shear)
        return F.affine(
            img,
            angle=angle,
            translate=[0, 0],
            scale=scale,
            shear=[shear, 0.0],
            interpolation=InterpolationMode.NEAREST,
            fill=self.fill,
        )

    def __repr__(self) -> str:
        return f"RandomAffine(degrees={self.degrees}, scale={self.scale}, shear={self.shear})"
