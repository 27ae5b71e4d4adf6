"""The ends of a transform pipeline: :class:`Compose` (which also takes numpy arrays and PIL
images, for user scripts) and :class:`ToUint8`, the last step that hands the loader a contiguous
uint8 tensor."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np
import torch
import torchvision.transforms.v2.functional as F

__all__ = ["Compose", "hwc_array_to_tensor", "ToUint8"]


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
