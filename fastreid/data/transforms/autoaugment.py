"""AutoAugment, RandAugment and AugMix (upstream FastReID's ``fastreid.data.transforms.autoaugment``).

Two ways in:

- :class:`AutoAugment` as ``build_transforms`` uses it: the ImageNet policy of the AutoAugment
  paper (torchvision's table) on the seeded uint8 pipeline, ``t(img, g)``, every random choice
  drawn from the sample's generator (same seed, same batches).
- Upstream's API for code written against it, working on PIL images (and uint8 tensors) with the
  global ``random`` / numpy generators as upstream's does: :class:`AugmentOp` (one named operation
  at a magnitude level 0..10, upstream's op names and level-to-argument rules), the policies
  (``auto_augment_policy``: ``original``, ``originalr``, ``v0``, ``v0r``), :class:`RandAugment`,
  :class:`AugMixAugment`, the op functions (``shear_x`` ... ``sharpness``, taking the operation's
  own argument), and the builders from config strings (``auto_augment_transform("original-mstd0.5",
  hparams)``, ``rand_augment_transform("rand-m9-n3", hparams)``, ``augment_and_mix_transform(
  "augmix-m5-w4-d2", hparams)``). The pixel operations are :func:`.functional.apply_op`'s
  (torchvision's kernels).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from typing import Any, Optional, Union

import numpy as np
import torch
from PIL import Image
from torchvision.transforms import AutoAugment as TorchvisionAutoAugment
from torchvision.transforms import AutoAugmentPolicy, InterpolationMode

from .functional import _SIGNED, _magnitudes, apply_op, chance, randint

__all__ = [
    "AugMixAugment",
    "AugmentOp",
    "AutoAugment",
    "RandAugment",
    "augment_and_mix_transform",
    "augmix_ops",
    "auto_augment_policy",
    "auto_augment_policy_original",
    "auto_augment_policy_originalr",
    "auto_augment_policy_v0",
    "auto_augment_policy_v0r",
    "auto_augment_transform",
    "rand_augment_ops",
    "rand_augment_transform",
]

ImageLike = Union[Image.Image, torch.Tensor]

_MAX_LEVEL = 10.0
_FILL = (128, 128, 128)
_HPARAMS_DEFAULT: dict[str, Any] = {"translate_const": 57, "img_mean": _FILL}
# PIL resampling -> torchvision's; torchvision's tensor affine kernels have no bicubic: bilinear
_INTERPOLATIONS = {
    Image.Resampling.NEAREST: InterpolationMode.NEAREST,
    Image.Resampling.BILINEAR: InterpolationMode.BILINEAR,
    Image.Resampling.BICUBIC: InterpolationMode.BILINEAR,
}
_RANDOM_INTERPOLATION = (Image.Resampling.BILINEAR, Image.Resampling.BICUBIC)


# --------------------------------------------------------------------------------------------------
# The op functions: an image and the operation's own argument (upstream's signatures)
# --------------------------------------------------------------------------------------------------


def _run(img: ImageLike, name: str, magnitude: float, kwargs: dict[str, Any]) -> ImageLike:
    """``apply_op`` on a PIL image (converted to and from a uint8 tensor) or a uint8 tensor."""
    resample = kwargs.get("resample", Image.Resampling.BILINEAR)
    if isinstance(resample, (list, tuple)):
        resample = random.choice(resample)
    interpolation = _INTERPOLATIONS.get(resample, InterpolationMode.BILINEAR)
    fill = kwargs.get("fillcolor", _FILL)
    if isinstance(img, torch.Tensor):
        return apply_op(img, name, magnitude, fill, interpolation)
    mode = img.mode
    tensor = torch.from_numpy(np.array(img.convert("RGB"), dtype=np.uint8)).permute(2, 0, 1)
    out = apply_op(tensor.contiguous(), name, magnitude, fill, interpolation)
    result = Image.fromarray(out.permute(1, 2, 0).numpy())
    return result if mode == "RGB" else result.convert(mode)


def shear_x(img: ImageLike, factor: float, **kwargs: Any) -> ImageLike:
    return _run(img, "ShearX", factor, kwargs)


def shear_y(img: ImageLike, factor: float, **kwargs: Any) -> ImageLike:
    return _run(img, "ShearY", factor, kwargs)


def _size(img: ImageLike) -> tuple[int, int]:
    """(width, height)."""
    return (img.shape[-1], img.shape[-2]) if isinstance(img, torch.Tensor) else img.size


def translate_x_rel(img: ImageLike, pct: float, **kwargs: Any) -> ImageLike:
    return _run(img, "TranslateX", pct * _size(img)[0], kwargs)


def translate_y_rel(img: ImageLike, pct: float, **kwargs: Any) -> ImageLike:
    return _run(img, "TranslateY", pct * _size(img)[1], kwargs)


def translate_x_abs(img: ImageLike, pixels: float, **kwargs: Any) -> ImageLike:
    return _run(img, "TranslateX", pixels, kwargs)


def translate_y_abs(img: ImageLike, pixels: float, **kwargs: Any) -> ImageLike:
    return _run(img, "TranslateY", pixels, kwargs)


def rotate(img: ImageLike, degrees: float, **kwargs: Any) -> ImageLike:
    return _run(img, "Rotate", degrees, kwargs)


def auto_contrast(img: ImageLike, **__: Any) -> ImageLike:
    return _run(img, "AutoContrast", 0.0, {})


def invert(img: ImageLike, **__: Any) -> ImageLike:
    return _run(img, "Invert", 0.0, {})


def equalize(img: ImageLike, **__: Any) -> ImageLike:
    return _run(img, "Equalize", 0.0, {})


def solarize(img: ImageLike, thresh: float, **__: Any) -> ImageLike:
    return _run(img, "Solarize", thresh, {})


def solarize_add(img: ImageLike, add: int, thresh: int = 128, **__: Any) -> ImageLike:
    if thresh != 128:
        raise ValueError(f"solarize_add: only the threshold 128 is supported, got {thresh}")
    return _run(img, "SolarizeAdd", add, {})


def posterize(img: ImageLike, bits_to_keep: int, **__: Any) -> ImageLike:
    return img if bits_to_keep >= 8 else _run(img, "Posterize", max(0, int(bits_to_keep)), {})


def contrast(img: ImageLike, factor: float, **__: Any) -> ImageLike:
    return _run(img, "Contrast", factor - 1.0, {})


def color(img: ImageLike, factor: float, **__: Any) -> ImageLike:
    return _run(img, "Color", factor - 1.0, {})


def brightness(img: ImageLike, factor: float, **__: Any) -> ImageLike:
    return _run(img, "Brightness", factor - 1.0, {})


def sharpness(img: ImageLike, factor: float, **__: Any) -> ImageLike:
    return _run(img, "Sharpness", factor - 1.0, {})


# --------------------------------------------------------------------------------------------------
# Magnitude levels (0..10) to the op functions' arguments
# --------------------------------------------------------------------------------------------------


def _signed(value: float) -> float:
    return -value if random.random() > 0.5 else value


def _fraction(level: float) -> float:
    return level / _MAX_LEVEL


LevelToArg = Callable[[float, dict], tuple]

# op name -> (op function, level -> arguments); the ranges are the AutoAugment / RandAugment papers'
_OPS: dict[str, tuple[Callable[..., ImageLike], Optional[LevelToArg]]] = {
    "AutoContrast": (auto_contrast, None),
    "Equalize": (equalize, None),
    "Invert": (invert, None),
    "Rotate": (rotate, lambda lv, hp: (_signed(_fraction(lv) * 30.0),)),
    "Posterize": (posterize, lambda lv, hp: (int(_fraction(lv) * 4),)),
    "PosterizeIncreasing": (posterize, lambda lv, hp: (4 - int(_fraction(lv) * 4),)),
    "PosterizeOriginal": (posterize, lambda lv, hp: (int(_fraction(lv) * 4) + 4,)),
    "Solarize": (solarize, lambda lv, hp: (int(_fraction(lv) * 256),)),
    "SolarizeIncreasing": (solarize, lambda lv, hp: (256 - int(_fraction(lv) * 256),)),
    "SolarizeAdd": (solarize_add, lambda lv, hp: (int(_fraction(lv) * 110),)),
    "Color": (color, lambda lv, hp: (_fraction(lv) * 1.8 + 0.1,)),
    "ColorIncreasing": (color, lambda lv, hp: (1.0 + _signed(_fraction(lv) * 0.9),)),
    "Contrast": (contrast, lambda lv, hp: (_fraction(lv) * 1.8 + 0.1,)),
    "ContrastIncreasing": (contrast, lambda lv, hp: (1.0 + _signed(_fraction(lv) * 0.9),)),
    "Brightness": (brightness, lambda lv, hp: (_fraction(lv) * 1.8 + 0.1,)),
    "BrightnessIncreasing": (brightness, lambda lv, hp: (1.0 + _signed(_fraction(lv) * 0.9),)),
    "Sharpness": (sharpness, lambda lv, hp: (_fraction(lv) * 1.8 + 0.1,)),
    "SharpnessIncreasing": (sharpness, lambda lv, hp: (1.0 + _signed(_fraction(lv) * 0.9),)),
    "ShearX": (shear_x, lambda lv, hp: (_signed(_fraction(lv) * 0.3),)),
    "ShearY": (shear_y, lambda lv, hp: (_signed(_fraction(lv) * 0.3),)),
    "TranslateX": (translate_x_abs, lambda lv, hp: (_signed(_fraction(lv) * float(hp["translate_const"])),)),
    "TranslateY": (translate_y_abs, lambda lv, hp: (_signed(_fraction(lv) * float(hp["translate_const"])),)),
    "TranslateXRel": (
        translate_x_rel,
        lambda lv, hp: (_signed(_fraction(lv) * hp.get("translate_pct", 0.45)),),
    ),
    "TranslateYRel": (
        translate_y_rel,
        lambda lv, hp: (_signed(_fraction(lv) * hp.get("translate_pct", 0.45)),),
    ),
}


class AugmentOp:
    """The op ``name`` at magnitude ``magnitude`` (0..10), applied with probability ``prob``.
    ``hparams``: ``translate_const`` (pixels at level 10), ``translate_pct``, ``img_mean`` (the
    fill colour), ``interpolation`` and ``magnitude_std`` (Gaussian noise on the magnitude)."""

    def __init__(
        self, name: str, prob: float = 0.5, magnitude: float = 10, hparams: Optional[dict] = None
    ) -> None:
        if name not in _OPS:
            raise ValueError(f"Unknown augmentation op {name!r}; known: {', '.join(sorted(_OPS))}")
        self.name = name
        self.hparams = dict(hparams or _HPARAMS_DEFAULT)
        self.aug_fn, self.level_fn = _OPS[name]
        self.prob = prob
        self.magnitude = magnitude
        self.magnitude_std = float(self.hparams.get("magnitude_std", 0))
        self.kwargs = {
            "fillcolor": self.hparams.get("img_mean", _FILL),
            "resample": self.hparams.get("interpolation", _RANDOM_INTERPOLATION),
        }

    def __call__(self, img: ImageLike) -> ImageLike:
        if self.prob < 1.0 and random.random() > self.prob:
            return img
        magnitude = self.magnitude
        if self.magnitude_std > 0:
            magnitude = random.gauss(magnitude, self.magnitude_std)
        magnitude = min(_MAX_LEVEL, max(0.0, magnitude))
        args = self.level_fn(magnitude, self.hparams) if self.level_fn is not None else ()
        return self.aug_fn(img, *args, **self.kwargs)

    def __repr__(self) -> str:
        return f"AugmentOp({self.name}, prob={self.prob}, magnitude={self.magnitude})"


# --------------------------------------------------------------------------------------------------
# AutoAugment policies
# --------------------------------------------------------------------------------------------------

# The "v0" ImageNet policy of the EfficientNet TPU implementation: (op, probability, level) pairs.
_POLICY_V0 = [
    (("Equalize", 0.8, 1), ("ShearY", 0.8, 4)), (("Color", 0.4, 9), ("Equalize", 0.6, 3)),
    (("Color", 0.4, 1), ("Rotate", 0.6, 8)), (("Solarize", 0.8, 3), ("Equalize", 0.4, 7)),
    (("Solarize", 0.4, 2), ("Solarize", 0.6, 2)), (("Color", 0.2, 0), ("Equalize", 0.8, 8)),
    (("Equalize", 0.4, 8), ("SolarizeAdd", 0.8, 3)), (("ShearX", 0.2, 9), ("Rotate", 0.6, 8)),
    (("Color", 0.6, 1), ("Equalize", 1.0, 2)), (("Invert", 0.4, 9), ("Rotate", 0.6, 0)),
    (("Equalize", 1.0, 9), ("ShearY", 0.6, 3)), (("Color", 0.4, 7), ("Equalize", 0.6, 0)),
    (("Posterize", 0.4, 6), ("AutoContrast", 0.4, 7)), (("Solarize", 0.6, 8), ("Color", 0.6, 9)),
    (("Solarize", 0.2, 4), ("Rotate", 0.8, 9)), (("Rotate", 1.0, 7), ("TranslateYRel", 0.8, 9)),
    (("ShearX", 0.0, 0), ("Solarize", 0.8, 4)), (("ShearY", 0.8, 0), ("Color", 0.6, 4)),
    (("Color", 1.0, 0), ("Rotate", 0.6, 2)), (("Equalize", 0.8, 4), ("Equalize", 0.0, 8)),
    (("Equalize", 1.0, 4), ("AutoContrast", 0.6, 2)), (("ShearY", 0.4, 7), ("SolarizeAdd", 0.6, 7)),
    (("Posterize", 0.8, 2), ("Solarize", 0.6, 10)), (("Solarize", 0.6, 8), ("Equalize", 0.6, 1)),
    (("Color", 0.8, 6), ("Rotate", 0.4, 5)),
]  # fmt: skip


def _original_table() -> list[tuple[tuple[str, float, int], ...]]:
    """The AutoAugment paper's ImageNet policy (torchvision's table; ops without a magnitude get 0)."""
    return [
        tuple((name, prob, 0 if level is None else int(level)) for name, prob, level in sub_policy)
        for sub_policy in TorchvisionAutoAugment(AutoAugmentPolicy.IMAGENET).policies
    ]


def _build(table, hparams: Optional[dict], posterize: str) -> list[list[AugmentOp]]:
    """AugmentOps of ``table``, its plain ``Posterize`` read as the ``posterize`` variant."""
    return [
        [
            AugmentOp(posterize if name == "Posterize" else name, prob, level, hparams)
            for name, prob, level in sub
        ]
        for sub in table
    ]


def auto_augment_policy_v0(hparams: Optional[dict]) -> list[list[AugmentOp]]:
    """The EfficientNet TPU implementation's ImageNet policy ("v0")."""
    return _build(_POLICY_V0, hparams, "Posterize")


def auto_augment_policy_v0r(hparams: Optional[dict]) -> list[list[AugmentOp]]:
    """ "v0" with the research posterize (more bits dropped as the level grows)."""
    return _build(_POLICY_V0, hparams, "PosterizeIncreasing")


def auto_augment_policy_original(hparams: Optional[dict]) -> list[list[AugmentOp]]:
    """The AutoAugment paper's ImageNet policy (https://arxiv.org/abs/1805.09501)."""
    return _build(_original_table(), hparams, "PosterizeOriginal")


def auto_augment_policy_originalr(hparams: Optional[dict]) -> list[list[AugmentOp]]:
    """The paper's ImageNet policy with the research posterize."""
    return _build(_original_table(), hparams, "PosterizeIncreasing")


_POLICIES = {
    "original": auto_augment_policy_original,
    "originalr": auto_augment_policy_originalr,
    "v0": auto_augment_policy_v0,
    "v0r": auto_augment_policy_v0r,
}


def auto_augment_policy(name: str = "original", hparams: Optional[dict] = None) -> list[list[AugmentOp]]:
    if name not in _POLICIES:
        raise ValueError(f"Unknown AutoAugment policy {name!r}; known: {', '.join(_POLICIES)}")
    return _POLICIES[name](hparams or dict(_HPARAMS_DEFAULT))


class AutoAugment:
    """AutoAugment: a random sub-policy of ``policy`` per image.

    ``AutoAugment()`` / ``AutoAugment(prob=p)`` (as ``build_transforms`` makes it): the ImageNet
    policy on the seeded pipeline, ``t(img, g)`` with ``img`` a uint8 tensor, applied with
    probability ``prob``, every choice drawn from ``g`` (called on a PIL image, or without ``g``,
    the generator is seeded from torch's global one). ``AutoAugment(policy)`` with a list of
    sub-policies (lists of :class:`AugmentOp`, as ``auto_augment_policy`` returns): upstream's
    behaviour, on PIL images or uint8 tensors, with the global ``random`` generator.
    """

    NUM_BINS = 10

    def __init__(
        self, policy: Optional[Sequence[Sequence[AugmentOp]]] = None, prob: float = 1.0, fill: int = 128
    ):
        self.policy = list(policy) if policy is not None else None
        self.policies = list(TorchvisionAutoAugment(AutoAugmentPolicy.IMAGENET).policies)
        self.prob = float(prob)
        self.fill = fill

    def __call__(self, img: ImageLike, g: Optional[torch.Generator] = None) -> ImageLike:
        if self.policy is not None:
            if self.prob < 1.0 and random.random() > self.prob:
                return img
            for op in random.choice(self.policy):
                img = op(img)
            return img
        if g is None:
            g = torch.Generator().manual_seed(int(torch.randint(0, 2**62, ())))
        if isinstance(img, Image.Image):
            return _run_seeded_on_pil(self, img, g)
        return self._seeded(img, g)

    def _seeded(self, img: torch.Tensor, g: torch.Generator) -> torch.Tensor:
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
        which = "imagenet" if self.policy is None else f"{len(self.policy)} sub-policies"
        return f"AutoAugment(policy={which}, prob={self.prob})"


def _run_seeded_on_pil(aa: AutoAugment, img: Image.Image, g: torch.Generator) -> Image.Image:
    tensor = torch.from_numpy(np.array(img.convert("RGB"), dtype=np.uint8)).permute(2, 0, 1).contiguous()
    return Image.fromarray(aa._seeded(tensor, g).permute(1, 2, 0).numpy())


def _config_sections(config_str: str, kind: str) -> list[tuple[str, str]]:
    """``"rand-m9-n3"`` -> ``[("m", "9"), ("n", "3")]`` after checking the first section is ``kind``."""
    parts = config_str.split("-")
    if kind and parts[0] != kind:
        raise ValueError(f"{config_str!r}: expected a config string starting with {kind!r}")
    sections = []
    for part in parts[1:]:
        key_value = re.split(r"(\d.*)", part)
        if len(key_value) >= 2:
            sections.append((key_value[0], key_value[1]))
    return sections


def auto_augment_transform(config_str: str, hparams: dict) -> AutoAugment:
    """AutoAugment from ``"<policy>[-mstd<std>]"``, e.g. ``"original-mstd0.5"``."""
    policy_name = config_str.split("-")[0]
    for key, value in _config_sections(config_str, ""):
        if key != "mstd":
            raise ValueError(f"{config_str!r}: unknown AutoAugment config section {key!r} (known: mstd)")
        hparams.setdefault("magnitude_std", float(value))
    return AutoAugment(auto_augment_policy(policy_name, hparams))


# --------------------------------------------------------------------------------------------------
# RandAugment
# --------------------------------------------------------------------------------------------------

_RAND_TRANSFORMS = [
    "AutoContrast", "Equalize", "Invert", "Rotate", "Posterize", "Solarize", "SolarizeAdd", "Color",
    "Contrast", "Brightness", "Sharpness", "ShearX", "ShearY", "TranslateXRel", "TranslateYRel",
]  # fmt: skip
_INCREASING = {
    "Posterize": "PosterizeIncreasing",
    "Solarize": "SolarizeIncreasing",
    "Color": "ColorIncreasing",
    "Contrast": "ContrastIncreasing",
    "Brightness": "BrightnessIncreasing",
    "Sharpness": "SharpnessIncreasing",
}
# RandAugment's op weights "0" (the EfficientNet TPU implementation's), by op
_RAND_CHOICE_WEIGHTS_0 = {
    "Rotate": 0.3, "ShearX": 0.2, "ShearY": 0.2, "TranslateXRel": 0.1, "TranslateYRel": 0.1,
    "Color": 0.025, "Sharpness": 0.025, "AutoContrast": 0.025, "Solarize": 0.005, "SolarizeAdd": 0.005,
    "Contrast": 0.005, "Brightness": 0.005, "Equalize": 0.005, "Posterize": 0.0, "Invert": 0.0,
}  # fmt: skip


def rand_augment_ops(
    magnitude: float = 10, hparams: Optional[dict] = None, transforms: Optional[Sequence[str]] = None
) -> list[AugmentOp]:
    return [
        AugmentOp(name, 0.5, magnitude, hparams or dict(_HPARAMS_DEFAULT))
        for name in transforms or _RAND_TRANSFORMS
    ]


class RandAugment:
    """``num_layers`` ops drawn from ``ops`` per image (with replacement; by ``choice_weights``
    without)."""

    def __init__(
        self, ops: Sequence[AugmentOp], num_layers: int = 2, choice_weights: Optional[Sequence[float]] = None
    ):
        self.ops = list(ops)
        self.num_layers = num_layers
        self.choice_weights = choice_weights

    def __call__(self, img: ImageLike) -> ImageLike:
        chosen = np.random.choice(
            len(self.ops), self.num_layers, replace=self.choice_weights is None, p=self.choice_weights
        )
        for index in chosen:
            img = self.ops[int(index)](img)
        return img


def rand_augment_transform(config_str: str, hparams: dict) -> RandAugment:
    """RandAugment from ``"rand[-m<level>][-n<layers>][-w<weights>][-mstd<std>][-inc<0|1>]"``."""
    magnitude, num_layers, weight_index, transforms = _MAX_LEVEL, 2, None, list(_RAND_TRANSFORMS)
    for key, value in _config_sections(config_str, "rand"):
        if key == "mstd":
            hparams.setdefault("magnitude_std", float(value))
        elif key == "inc":
            if int(value):
                transforms = [_INCREASING.get(t, t) for t in _RAND_TRANSFORMS]
        elif key == "m":
            magnitude = int(value)
        elif key == "n":
            num_layers = int(value)
        elif key == "w":
            weight_index = int(value)
        else:
            raise ValueError(f"{config_str!r}: unknown RandAugment config section {key!r}")
    weights = None
    if weight_index is not None:
        if weight_index != 0:
            raise ValueError(f"{config_str!r}: RandAugment has one set of op weights, w0")
        raw = np.array([_RAND_CHOICE_WEIGHTS_0[t] for t in _RAND_TRANSFORMS])
        weights = list(raw / raw.sum())
    return RandAugment(rand_augment_ops(magnitude, hparams, transforms), num_layers, weights)


# --------------------------------------------------------------------------------------------------
# AugMix
# --------------------------------------------------------------------------------------------------

_AUGMIX_TRANSFORMS = [
    "AutoContrast", "ColorIncreasing", "ContrastIncreasing", "BrightnessIncreasing", "SharpnessIncreasing",
    "Equalize", "Rotate", "PosterizeIncreasing", "SolarizeIncreasing", "ShearX", "ShearY", "TranslateXRel",
    "TranslateYRel",
]  # fmt: skip


def augmix_ops(
    magnitude: float = 10, hparams: Optional[dict] = None, transforms: Optional[Sequence[str]] = None
) -> list[AugmentOp]:
    return [
        AugmentOp(name, 1.0, magnitude, hparams or dict(_HPARAMS_DEFAULT))
        for name in transforms or _AUGMIX_TRANSFORMS
    ]


class AugMixAugment:
    """AugMix (Hendrycks et al., 2020) on PIL images: ``width`` chains of ``depth`` ops (1-3 at
    random when ``depth`` <= 0) mixed with Dirichlet(``alpha``) weights, blended with the image
    by a Beta(``alpha``, ``alpha``) factor; ``blended`` blends each chain into the image instead."""

    def __init__(
        self,
        ops: Sequence[AugmentOp],
        alpha: float = 1.0,
        width: int = 3,
        depth: int = -1,
        blended: bool = False,
    ):
        self.ops = list(ops)
        self.alpha = alpha
        self.width = width
        self.depth = depth
        self.blended = blended

    def _chain(self, img: Image.Image) -> Image.Image:
        depth = self.depth if self.depth > 0 else int(np.random.randint(1, 4))
        for index in np.random.choice(len(self.ops), depth, replace=True):
            img = self.ops[int(index)](img)  # type: ignore[assignment]  # PIL in, PIL out
        return img

    def __call__(self, img: Image.Image) -> Image.Image:
        weights = np.random.dirichlet([self.alpha] * self.width).astype(np.float32)
        m = float(np.random.beta(self.alpha, self.alpha))
        if self.blended:
            # successive blends whose products give each chain its share: w_i * m overall
            shares, remaining, blend = weights * m, 1.0, []
            for share in shares[::-1]:
                alpha = share / remaining
                remaining *= 1 - alpha
                blend.append(alpha)
            original = img.copy()
            for alpha in blend[::-1]:
                img = Image.blend(img, self._chain(original), float(alpha))
            return img
        mixed = np.zeros((img.size[1], img.size[0], len(img.getbands())), dtype=np.float32)
        for weight in weights:
            mixed += weight * np.asarray(self._chain(img), dtype=np.float32)
        mixed_img = Image.fromarray(np.clip(mixed, 0, 255).astype(np.uint8))
        return Image.blend(img, mixed_img, m)


def augment_and_mix_transform(config_str: str, hparams: dict) -> AugMixAugment:
    """AugMix from ``"augmix[-m<severity>][-w<width>][-d<depth>][-a<alpha>][-b<0|1>][-mstd<std>]"``."""
    magnitude, width, depth, alpha, blended = 3, 3, -1, 1.0, False
    for key, value in _config_sections(config_str, "augmix"):
        if key == "mstd":
            hparams.setdefault("magnitude_std", float(value))
        elif key == "m":
            magnitude = int(value)
        elif key == "w":
            width = int(value)
        elif key == "d":
            depth = int(value)
        elif key == "a":
            alpha = float(value)
        elif key == "b":
            blended = bool(int(value))
        else:
            raise ValueError(f"{config_str!r}: unknown AugMix config section {key!r}")
    return AugMixAugment(
        augmix_ops(magnitude, hparams), alpha=alpha, width=width, depth=depth, blended=blended
    )
