"""The operations the transforms are made of (upstream FastReID's ``fastreid.data.transforms.functional``).

- The seeded pipeline's: random draws from a sample's ``torch.Generator`` (``uniform``,
  ``randint``, ``chance``, ``numpy_rng``; never the global RNGs, which thread workers share, so a
  sample's augmentation depends only on its key), and the AutoAugment / AugMix operations on uint8
  tensors (``apply_op``, torchvision's op names).
- Upstream's PIL API, for code written against it: ``to_tensor``, the level helpers
  (``int_parameter``, ``float_parameter``, ``sample_level``) and AugMix's PIL operations
  (``autocontrast`` ... ``sharpness``, listed in ``augmentations``), built on PIL's ImageOps and
  ImageEnhance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Optional, Union

import numpy as np
import torch
import torchvision.transforms.v2.functional as F
from PIL import Image, ImageEnhance, ImageOps
from torchvision.transforms import InterpolationMode

__all__ = [
    "uniform",
    "randint",
    "chance",
    "numpy_rng",
    "apply_op",
    "to_tensor",
    "int_parameter",
    "float_parameter",
    "sample_level",
    "autocontrast",
    "equalize",
    "posterize",
    "rotate",
    "solarize",
    "shear_x",
    "shear_y",
    "translate_x",
    "translate_y",
    "color",
    "contrast",
    "brightness",
    "sharpness",
    "augmentations",
]


def uniform(g: torch.Generator, low: float, high: float) -> float:
    return low + (high - low) * float(torch.rand((), generator=g))


def randint(g: torch.Generator, low: int, high: int) -> int:
    """A random integer in ``[low, high]`` (both included)."""
    return int(torch.randint(low, high + 1, (), generator=g))


def chance(g: torch.Generator, p: float) -> bool:
    """True with probability ``p`` (one draw from ``g`` whatever ``p`` is, keeping streams aligned)."""
    return float(torch.rand((), generator=g)) < p


def numpy_rng(g: torch.Generator) -> np.random.Generator:
    """A numpy Generator seeded from ``g`` (for Dirichlet / Beta draws torch cannot seed)."""
    return np.random.default_rng(int(torch.randint(0, 2**62, (), generator=g)))


Fill = Union[int, Sequence[int]]


def _shift(
    img: torch.Tensor,
    fill: Fill,
    translate: list[int],
    shear: list[float],
    center: Optional[list[int]] = None,
    interpolation: InterpolationMode = InterpolationMode.NEAREST,
) -> torch.Tensor:
    """An affine map with no rotation or scaling: a translation or a shear (``center`` None: the
    image centre)."""
    return F.affine(
        img,
        angle=0.0,
        translate=translate,
        scale=1.0,
        shear=shear,
        interpolation=interpolation,
        fill=fill if isinstance(fill, int) else list(fill),
        center=center,
    )


def apply_op(
    img: torch.Tensor,
    name: str,
    magnitude: float,
    fill: Fill = 128,
    interpolation: InterpolationMode = InterpolationMode.NEAREST,
) -> torch.Tensor:
    """One AutoAugment / RandAugment / AugMix operation on a uint8 image (torchvision's op names,
    plus ``SolarizeAdd``: add ``magnitude`` to the pixels below 128)."""
    if name in ("ShearX", "ShearY"):  # sheared about the top-left corner, as torchvision
        angle = math.degrees(math.atan(magnitude))
        shear = [angle, 0.0] if name == "ShearX" else [0.0, angle]
        return _shift(img, fill, [0, 0], shear, center=[0, 0], interpolation=interpolation)
    if name == "TranslateX":
        return _shift(img, fill, [int(magnitude), 0], [0.0, 0.0], interpolation=interpolation)
    if name == "TranslateY":
        return _shift(img, fill, [0, int(magnitude)], [0.0, 0.0], interpolation=interpolation)
    if name == "Rotate":
        return F.rotate(
            img, magnitude, interpolation=interpolation, fill=fill if isinstance(fill, int) else list(fill)
        )
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
    if name == "SolarizeAdd":
        added = (img.to(torch.int16) + int(magnitude)).clamp_(0, 255).to(torch.uint8)
        return torch.where(img < 128, added, img)
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


# ------------------------------------------------------------------------------------------------
# Upstream's PIL API: to_tensor, the level helpers and AugMix's operations on PIL images. Their
# random choices (level, sign) come from numpy's global generator, as upstream's do; the seeded
# pipeline above does not use them.
# ------------------------------------------------------------------------------------------------

_PARAMETER_MAX = 10


def to_tensor(pic: Image.Image | np.ndarray) -> torch.Tensor:
    """A PIL image or H x W (x C) array as a C x H x W tensor, without rescaling: uint8 input becomes
    float on 0..255 (upstream's convention: the model normalises), other dtypes keep theirs."""
    if isinstance(pic, np.ndarray):
        if pic.ndim not in (2, 3):
            raise ValueError(f"to_tensor: expected an H x W or H x W x C array, got shape {pic.shape}")
        array = pic[:, :, None] if pic.ndim == 2 else pic
    elif isinstance(pic, Image.Image):
        if pic.mode == "1":
            array = np.asarray(pic, dtype=np.uint8)[:, :, None] * 255
        else:
            array = np.asarray(pic)
            array = array[:, :, None] if array.ndim == 2 else array
    else:
        raise TypeError(f"to_tensor: expected a PIL image or a numpy array, got {type(pic).__name__}")
    tensor = torch.from_numpy(np.ascontiguousarray(array.transpose(2, 0, 1)))
    return tensor.float() if tensor.dtype == torch.uint8 else tensor


def int_parameter(level: float, maxval: float) -> int:
    """``level`` (0..10) scaled to an int in 0..``maxval``."""
    return int(level * maxval / _PARAMETER_MAX)


def float_parameter(level: float, maxval: float) -> float:
    """``level`` (0..10) scaled to a float in 0..``maxval``."""
    return float(level) * maxval / _PARAMETER_MAX


def sample_level(n: float) -> float:
    """A level drawn uniformly from [0.1, n) (numpy's global generator)."""
    return float(np.random.uniform(low=0.1, high=n))


def _negated_at_random(value: float) -> float:
    return -value if np.random.uniform() > 0.5 else value


def _affine(pil_img: Image.Image, coefficients: tuple[float, ...]) -> Image.Image:
    return pil_img.transform(
        pil_img.size, Image.Transform.AFFINE, coefficients, resample=Image.Resampling.BILINEAR
    )


def autocontrast(pil_img: Image.Image, *args: Any) -> Image.Image:
    return ImageOps.autocontrast(pil_img)


def equalize(pil_img: Image.Image, *args: Any) -> Image.Image:
    return ImageOps.equalize(pil_img)


def posterize(pil_img: Image.Image, level: float, *args: Any) -> Image.Image:
    """Keep ``4 - int_parameter(sampled level, 4)`` bits per channel."""
    return ImageOps.posterize(pil_img, 4 - int_parameter(sample_level(level), 4))


def rotate(pil_img: Image.Image, level: float, *args: Any) -> Image.Image:
    """Rotate by up to 30 degrees (sampled level), either way."""
    degrees = int_parameter(sample_level(level), 30)
    return pil_img.rotate(_negated_at_random(degrees), resample=Image.Resampling.BILINEAR)


def solarize(pil_img: Image.Image, level: float, *args: Any) -> Image.Image:
    return ImageOps.solarize(pil_img, 256 - int_parameter(sample_level(level), 256))


def shear_x(pil_img: Image.Image, level: float) -> Image.Image:
    factor = _negated_at_random(float_parameter(sample_level(level), 0.3))
    return _affine(pil_img, (1, factor, 0, 0, 1, 0))


def shear_y(pil_img: Image.Image, level: float) -> Image.Image:
    factor = _negated_at_random(float_parameter(sample_level(level), 0.3))
    return _affine(pil_img, (1, 0, 0, factor, 1, 0))


def translate_x(pil_img: Image.Image, level: float) -> Image.Image:
    """Shift by up to a third of the width (sampled level), either way."""
    pixels = _negated_at_random(int_parameter(sample_level(level), pil_img.size[0] / 3))
    return _affine(pil_img, (1, 0, pixels, 0, 1, 0))


def translate_y(pil_img: Image.Image, level: float) -> Image.Image:
    pixels = _negated_at_random(int_parameter(sample_level(level), pil_img.size[1] / 3))
    return _affine(pil_img, (1, 0, 0, 0, 1, pixels))


def _enhance(enhancer: Any, pil_img: Image.Image, level: float) -> Image.Image:
    return enhancer(pil_img).enhance(float_parameter(sample_level(level), 1.8) + 0.1)


def color(pil_img: Image.Image, level: float, *args: Any) -> Image.Image:
    return _enhance(ImageEnhance.Color, pil_img, level)


def contrast(pil_img: Image.Image, level: float, *args: Any) -> Image.Image:
    return _enhance(ImageEnhance.Contrast, pil_img, level)


def brightness(pil_img: Image.Image, level: float, *args: Any) -> Image.Image:
    return _enhance(ImageEnhance.Brightness, pil_img, level)


def sharpness(pil_img: Image.Image, level: float, *args: Any) -> Image.Image:
    return _enhance(ImageEnhance.Sharpness, pil_img, level)


#: AugMix's operations in upstream's order (colour ops left out: they overlap the test corruptions).
augmentations = [
    autocontrast,
    equalize,
    posterize,
    rotate,
    solarize,
    shear_x,
    shear_y,
    translate_x,
    translate_y,
]
