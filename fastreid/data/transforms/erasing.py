"""Random erasing and random patch: occlusions drawn from the sample's generator."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torchvision.transforms.v2.functional as F
from torchvision.transforms import InterpolationMode

from .draws import chance, randint, uniform

__all__ = ["RandomErasing", "RandomPatch"]


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
    """Random patch (Zhou et al., OSNet): paste a flipped / rotated patch at a random place.

    Upstream keeps a pool of patches cut from earlier images; which images came earlier
    depends on the worker that loads them, so runs would differ by worker count. Here the patch
    is cut from the same image at another place, which keeps the occlusion effect and makes
    the result a function of the sample's generator only.
    """

    def __init__(
        self,
        prob_happen: float = 0.5,
        patch_min_area: float = 0.01,
        patch_max_area: float = 0.5,
        patch_min_ratio: float = 0.1,
        prob_rotate: float = 0.5,
        prob_flip_leftright: float = 0.5,
    ):
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
