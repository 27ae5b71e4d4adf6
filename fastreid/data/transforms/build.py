"""``build_transforms(cfg, is_train)``: the INPUT keys of the config as a seeded pipeline.

Order (as upstream): AutoAugment, resize, random resized crop, pad + random crop, flip, colour
jitter, affine, AugMix, random erasing, random patch. Test: resize, then a centre crop when
INPUT.CROP is enabled.
"""

from __future__ import annotations

from .autoaugment import AutoAugment
from .transforms import (
    AugMix,
    CenterCrop,
    ColorJitter,
    Compose,
    PadRandomCrop,
    RandomAffine,
    RandomErasing,
    RandomHorizontalFlip,
    RandomPatch,
    RandomResizedCrop,
    Resize,
    ToUint8,
)

__all__ = ["build_transforms", "input_size"]


def _size(size) -> list[int]:
    size = [int(s) for s in size]
    return size[:1] if len(size) == 1 else size[:2]


def input_size(cfg, is_train: bool) -> list[int] | None:
    """The [h, w] the pipeline resizes decoded images to first (None: no resize). The decoded
    cache stores images at this size, so the resize is done once."""
    size = _size(cfg.INPUT.SIZE_TRAIN if is_train else cfg.INPUT.SIZE_TEST)
    return size if size and size[0] > 0 else None


def build_transforms(cfg, is_train: bool = True) -> Compose:
    res: list = []
    inp = cfg.INPUT
    size = input_size(cfg, is_train)
    crop_size = _size(inp.CROP.SIZE)
    if not is_train:
        if size is not None:
            res.append(Resize(size))
        if inp.CROP.ENABLED:
            res.append(CenterCrop(crop_size))
        res.append(ToUint8())
        return Compose(res)

    if inp.AUTOAUG.ENABLED:
        res.append(AutoAugment(prob=inp.AUTOAUG.PROB))
    if size is not None:
        res.append(Resize(size))
    if inp.CROP.ENABLED:
        res.append(RandomResizedCrop(crop_size, scale=inp.CROP.SCALE, ratio=inp.CROP.RATIO))
    if inp.PADDING.ENABLED:
        if size is None or len(size) != 2:
            raise ValueError("INPUT.PADDING needs INPUT.SIZE_TRAIN as [height, width] (the crop size)")
        res.append(PadRandomCrop(inp.PADDING.SIZE, size, padding_mode=inp.PADDING.MODE))
    if inp.FLIP.ENABLED:
        res.append(RandomHorizontalFlip(p=inp.FLIP.PROB))
    if inp.CJ.ENABLED:
        res.append(
            ColorJitter(inp.CJ.BRIGHTNESS, inp.CJ.CONTRAST, inp.CJ.SATURATION, inp.CJ.HUE, prob=inp.CJ.PROB)
        )
    if inp.AFFINE.ENABLED:
        res.append(RandomAffine())
    if inp.AUGMIX.ENABLED:
        res.append(AugMix(prob=inp.AUGMIX.PROB))
    if inp.REA.ENABLED:
        res.append(RandomErasing(p=inp.REA.PROB, value=inp.REA.VALUE))
    if inp.RPT.ENABLED:
        res.append(RandomPatch(prob_happen=inp.RPT.PROB))
    res.append(ToUint8())
    return Compose(res)
