"""Seeded image transforms on uint8 tensors (upstream FastReID's ``fastreid.data.transforms.transforms``).

Every transform is called as ``t(img, g)``: ``img`` a ``torch.uint8`` tensor 3xHxW (RGB, 0..255)
and ``g`` the sample's ``torch.Generator``. All random parameters are drawn from ``g`` (never
from the global RNGs, which thread workers share), so a sample's augmentation depends only on
its key: the same batches come out whatever the loader mode. Pixels stay uint8 on the 0..255
scale; normalisation is done by the model.

The pipeline's ends (``Compose``, ``ToUint8``, ``hwc_array_to_tensor``, upstream's ``ToTensor``),
geometry (``Resize``, ``CenterCrop``, ``RandomResizedCrop``, ``RandomHorizontalFlip``,
``PadRandomCrop``, ``RandomAffine``), colour (``ColorJitter``), occlusion (``RandomErasing``,
``RandomPatch``) and ``AugMix``; ``AutoAugment`` is in :mod:`.autoaugment`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any, Optional, Union

import numpy as np
import torch
import torchvision.transforms.v2.functional as F
from torchvision.transforms import InterpolationMode

from .functional import apply_op, chance, numpy_rng, randint, to_tensor, uniform

logger = logging.getLogger(__name__)

__all__ = [
    "Compose",
    "hwc_array_to_tensor",
    "ToUint8",
    "Size",
    "Resize",
    "CenterCrop",
    "RandomResizedCrop",
    "RandomHorizontalFlip",
    "PadRandomCrop",
    "RandomAffine",
    "ColorJitter",
    "RandomErasing",
    "RandomPatch",
    "AugMix",
    "ToTensor",
]


class ToTensor:
    """Upstream's ``ToTensor``: a PIL image or H x W x C array as a C x H x W float tensor on
    0..255 (no division by 255: the model normalises), see :func:`.functional.to_tensor`."""

    def __call__(self, pic: Any) -> torch.Tensor:
        return to_tensor(pic)

    def __repr__(self) -> str:
        return "ToTensor()"


def hwc_array_to_tensor(img: np.ndarray) -> torch.Tensor:
    """An H x W x 3 (or H x W grey) uint8 RGB array as a 3 x H x W uint8 tensor (a copy)."""
    if img.dtype != np.uint8:
        raise TypeError(f"image arrays must be uint8 (0..255), got {img.dtype}")
    if img.ndim == 2:
        img = np.repeat(img[:, :, None], 3, axis=2)
    if img.ndim != 3 or img.shape[2] not in (3, 4):
        raise ValueError(f"image arrays must be H x W x 3 (RGB) or H x W, got shape {img.shape}")
    return torch.from_numpy(np.ascontiguousarray(img[:, :, :3].transpose(2, 0, 1)))


class Compose:
    """Apply transforms in order, passing the same generator to each."""

    def __init__(self, transforms: Sequence):
        self.transforms = list(transforms)

    def __call__(self, img, g: Optional[torch.Generator] = None) -> torch.Tensor:
        if isinstance(img, np.ndarray):  # H x W x 3 (or H x W) uint8 RGB, for user scripts
            img = hwc_array_to_tensor(img)
        elif not isinstance(img, torch.Tensor):  # a PIL image, for user scripts
            img = F.pil_to_tensor(img.convert("RGB"))
        if g is None:  # direct use outside the loader: a fresh draw from the global RNG
            g = torch.Generator().manual_seed(int(torch.randint(0, 2**62, ())))
        for t in self.transforms:
            img = t(img, g)
        return img

    def __repr__(self) -> str:
        inner = "".join(f"\n    {t!r}," for t in self.transforms)
        return f"{type(self).__name__}({inner}\n)"


class ToUint8:
    """Make sure the output is a contiguous uint8 tensor (rounds float inputs)."""

    def __call__(self, img: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        if img.dtype != torch.uint8:
            img = img.round().clamp(0, 255).to(torch.uint8)
        return img.contiguous()

    def __repr__(self) -> str:
        return "ToUint8()"


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


class RandomErasing:
    """Random erasing (Zhong et al.): with probability ``p``, fill a random box with ``value``.

    ``value`` is on the 0..255 scale (``INPUT.REA.VALUE``); one value per channel, or a single
    number. Box area ``scale`` x image area and aspect ``ratio`` (log-uniform) as torchvision.
    """

    def __init__(
        self,
        p: float = 0.5,
        value: Sequence[float] | float = (0.0, 0.0, 0.0),
        scale: Sequence[float] = (0.02, 0.33),
        ratio: Sequence[float] = (0.3, 3.3),
    ):
        self.p = float(p)
        values = [float(value)] if isinstance(value, (int, float)) else [float(v) for v in value]
        self.value = torch.tensor(values).round().clamp(0, 255).to(torch.uint8).view(-1, 1, 1)
        self.scale = (float(scale[0]), float(scale[1]))
        self.log_ratio = (math.log(ratio[0]), math.log(ratio[1]))

    def __call__(self, img: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        if not chance(g, self.p):
            return img
        c, height, width = img.shape
        area = height * width
        for _ in range(10):
            target = area * uniform(g, *self.scale)
            aspect = math.exp(uniform(g, *self.log_ratio))
            h = int(round(math.sqrt(target * aspect)))
            w = int(round(math.sqrt(target / aspect)))
            if h < height and w < width:
                top, left = randint(g, 0, height - h), randint(g, 0, width - w)
                out = img.clone()  # the input may be shared (a cache page, a caller's tensor)
                out[:, top : top + h, left : left + w] = self.value.to(img.dtype)
                return out
        return img

    def __repr__(self) -> str:
        return f"RandomErasing(p={self.p}, value={self.value.flatten().tolist()}, scale={self.scale})"


class RandomPatch:
    """Random patch (Zhou et al., OSNet): paste a patch, flipped left-right with probability
    ``prob_flip_leftright``, at a random place, with probability ``prob_happen``.

    Upstream keeps a pool of patches cut from earlier images (``pool_capacity``, used once it holds
    ``min_sample_size``); which images came earlier depends on the worker that loads them, so runs
    would differ by worker count. Here the patch is cut from the same image at another place,
    which keeps the occlusion effect and makes the result a function of the sample's generator:
    the two pool arguments are accepted and have no effect (a warning says so when they are set).
    ``prob_rotate`` (not in upstream) also rotates the patch by up to 10 degrees.
    """

    def __init__(
        self,
        prob_happen: float = 0.5,
        pool_capacity: int = 50000,
        min_sample_size: int = 100,
        patch_min_area: float = 0.01,
        patch_max_area: float = 0.5,
        patch_min_ratio: float = 0.1,
        prob_flip_leftright: float = 0.5,
        prob_rotate: float = 0.0,
    ):
        if (pool_capacity, min_sample_size) != (50000, 100):
            logger.warning(
                "RandomPatch: pool_capacity and min_sample_size have no effect here (patches are cut "
                "from the same image, so that batches do not depend on the loader)"
            )
        self.prob_happen = float(prob_happen)
        self.area = (patch_min_area, patch_max_area)
        self.min_ratio = patch_min_ratio
        self.prob_rotate, self.prob_flip = prob_rotate, prob_flip_leftright

    def __call__(self, img: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        if not chance(g, self.prob_happen):
            return img
        _, height, width = img.shape
        for _ in range(100):
            target = uniform(g, *self.area) * height * width
            aspect = uniform(g, self.min_ratio, 1.0 / self.min_ratio)
            h, w = int(round(math.sqrt(target * aspect))), int(round(math.sqrt(target / aspect)))
            if 0 < w < width and 0 < h < height:
                break
        else:
            return img
        sy, sx = randint(g, 0, height - h), randint(g, 0, width - w)
        patch = img[:, sy : sy + h, sx : sx + w]
        if chance(g, self.prob_flip):
            patch = patch.flip(-1)
        if chance(g, self.prob_rotate):
            patch = F.rotate(patch, float(randint(g, -10, 10)), interpolation=InterpolationMode.NEAREST)
        ty, tx = randint(g, 0, height - h), randint(g, 0, width - w)
        out = img.clone()
        out[:, ty : ty + h, tx : tx + w] = patch
        return out

    def __repr__(self) -> str:
        return f"RandomPatch(prob_happen={self.prob_happen})"


class AugMix:
    """AugMix (Hendrycks et al., 2020) with upstream's re-ID op list, applied with ``prob``.

    ``mixture_width`` chains of ``mixture_depth`` ops (1-3 at random when it is -1), at severity
    ``aug_severity``, mixed with Dirichlet(``aug_prob_coeff``) weights and blended with the
    original by a Beta(``aug_prob_coeff``, ``aug_prob_coeff``) factor, upstream's arguments and
    defaults. Colour-changing ops are left out, as upstream.
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
        self,
        prob: float = 0.5,
        aug_prob_coeff: float = 0.1,
        mixture_width: int = 3,
        mixture_depth: int = 1,
        aug_severity: int = 1,
    ):
        self.prob = float(prob)
        self.alpha, self.width, self.depth, self.severity = (
            aug_prob_coeff,
            mixture_width,
            mixture_depth,
            aug_severity,
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
