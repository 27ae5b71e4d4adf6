"""A synthetic image classification set in upstream FastClas's layout: insects drawn per class.

``python -m fastreid.data.synthetic.classes --root datasets`` writes::

    datasets/hymenoptera_data/train/ants/00001.jpg ...   80 training images per class
    datasets/hymenoptera_data/train/bees/...
    datasets/hymenoptera_data/val/ants/...               30 validation images per class
    datasets/hymenoptera_data/val/bees/...

the folder tree of PyTorch's ants-and-bees set, which the ``Hymenoptera`` data set
(``fastreid.projects.clas``) reads unchanged and ``configs/Clas/base-clas.yml`` trains on with no
download. ``--num-classes N`` adds more insect classes (wasps, hornets, ...) to the same tree.

Each class is a body plan: ants are dark, wingless, with a narrow waist and a plain abdomen;
bees are yellow to orange, with dark stripes across the abdomen and pale wings; further classes
draw their colours, stripes, wings and proportions from the seed and the class. Each image draws
one insect of its class with its colours jittered, at a random place, size and angle, over a
random background of leaves and petals (colours that are neither an ant's nor a bee's), with
sensor noise and a slight blur: ants and bees are told apart at a glance, so that a small model
learns them in a few dozen iterations. Output is a pure function of the arguments.
"""

from __future__ import annotations

import logging
import math
import os
import sys
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from PIL import Image, ImageChops, ImageDraw

from .common import (
    SyntheticSpecError,
    add_noise,
    hsv,
    jpeg_bytes,
    rng,
    spec_command,
    write_generated_tree,
)

__all__ = ["ClassesSpec", "CLASS_NAMES", "BodyPlan", "body_plan", "draw_image", "generate_classes", "main"]

FOLDER = "hymenoptera_data"
SPLITS = ("train", "val")
#: The class folder names: upstream's two, then more Hymenoptera, then numbered species.
CLASS_NAMES = (
    "ants",
    "bees",
    "wasps",
    "hornets",
    "bumblebees",
    "sawflies",
    "ichneumons",
    "velvet_ants",
    "carpenter_bees",
    "cuckoo_wasps",
)
MAX_CLASSES = 100
SUPERSAMPLE = 2  # the insect is drawn at twice its size, then scaled down (smooth edges)


@dataclass(frozen=True)
class ClassesSpec:
    """What to write: ``num_classes`` classes, ``num_train`` / ``num_val`` images of each, every
    image ``width`` x ``height`` pixels."""

    num_classes: int = 2
    num_train: int = 80
    num_val: int = 30
    width: int = 80
    height: int = 64
    seed: int = 0

    @classmethod
    def small(cls, seed: int = 0, num_classes: int = 2) -> ClassesSpec:
        """A tiny set for tests: 8 training and 4 validation images per class, 48 x 40 pixels."""
        return cls(num_classes=num_classes, num_train=8, num_val=4, width=48, height=40, seed=seed)

    def validate(self) -> None:
        if not 2 <= self.num_classes <= MAX_CLASSES:
            raise SyntheticSpecError(
                f"synthetic classes: need 2 to {MAX_CLASSES} classes, got {self.num_classes}"
            )
        if self.num_train < 1 or self.num_val < 1:
            raise SyntheticSpecError(
                "synthetic classes: need at least one training and one val image per class"
            )
        if min(self.width, self.height) < 24:
            raise SyntheticSpecError("synthetic classes: images must be at least 24 x 24 pixels")

    def class_names(self) -> list[str]:
        extra = [f"species_{i:02d}" for i in range(len(CLASS_NAMES), self.num_classes)]
        return [*CLASS_NAMES, *extra][: self.num_classes]


@dataclass(frozen=True)
class BodyPlan:
    """How a class looks: colours (HSV, 0..1), abdomen proportions (fractions of the body
    length), stripes and wings."""

    hue: float
    saturation: float
    value: float
    abdomen_length: float
    abdomen_width: float
    waist: float  # the gap between thorax and abdomen
    stripes: int  # dark bands across the abdomen
    stripe_hue: float
    stripe_value: float
    wings: bool
    leg_length: float


ANT = BodyPlan(0.05, 0.7, 0.22, 0.30, 0.13, 0.07, 0, 0.0, 0.1, False, 0.42)
BEE = BodyPlan(0.12, 0.85, 0.9, 0.32, 0.17, 0.0, 3, 0.08, 0.1, True, 0.3)


def body_plan(seed: int, index: int) -> BodyPlan:
    """The body plan of class ``index`` (ants and bees fixed; the others drawn from ``seed``)."""
    if index == 0:
        return ANT
    if index == 1:
        return BEE
    r = rng(seed, 61, index)
    return BodyPlan(
        hue=float(r.random()),
        saturation=float(r.uniform(0.4, 0.95)),
        value=float(r.uniform(0.25, 0.95)),
        abdomen_length=float(r.uniform(0.22, 0.38)),
        abdomen_width=float(r.uniform(0.08, 0.18)),
        waist=float(r.choice([0.0, 0.04, 0.08])),
        stripes=int(r.integers(0, 5)),
        stripe_hue=float(r.random()),
        stripe_value=float(r.uniform(0.05, 0.4)),
        wings=bool(r.random() < 0.6),
        leg_length=float(r.uniform(0.25, 0.45)),
    )


def _rgb(h: float, s: float, v: float, alpha: int = 255) -> tuple[int, int, int, int]:
    red, green, blue = (np.clip(hsv(h % 1.0, min(max(s, 0), 1), min(max(v, 0), 1)), 0, 1) * 255).astype(int)
    return int(red), int(green), int(blue), alpha


def _insect(plan: BodyPlan, length: int, r: np.random.Generator) -> Image.Image:
    """One insect of ``plan``, facing right, on a transparent square of side ``length``."""
    size = length
    img = Image.new("RGBA", (size, size), (0, 0, 0, 0))
    draw = ImageDraw.Draw(img)
    cx, cy, unit = size / 2, size / 2, size * 0.8  # the body spans ~0.8 of the square
    hue = plan.hue + r.uniform(-0.03, 0.03)
    body = _rgb(hue, plan.saturation * r.uniform(0.85, 1.1), plan.value * r.uniform(0.8, 1.15))
    dark = _rgb(hue, 0.5, min(plan.value, 0.3) * 0.6)
    width = max(1, int(size * 0.015))

    def ellipse(
        x: float, y: float, rx: float, ry: float, fill: Any, target: ImageDraw.ImageDraw = draw
    ) -> None:
        target.ellipse([x - rx, y - ry, x + rx, y + ry], fill=fill)

    thorax_x = cx + 0.02 * unit
    # legs: three pairs from the thorax, each with a knee
    for k, spread in enumerate((-0.5, 0.0, 0.5)):
        for side in (-1, 1):
            knee = (thorax_x + spread * 0.12 * unit, cy + side * plan.leg_length * 0.5 * unit)
            foot = (
                knee[0] + (k - 1) * 0.12 * unit + r.uniform(-0.03, 0.03) * unit,
                cy + side * plan.leg_length * unit,
            )
            draw.line([(thorax_x, cy), knee, foot], fill=dark, width=width)
    # abdomen, with stripes clipped to it
    ab_x = thorax_x - 0.08 * unit - plan.waist * unit - plan.abdomen_length * unit
    ab_rx, ab_ry = plan.abdomen_length * unit, plan.abdomen_width * unit
    ellipse(ab_x, cy, ab_rx, ab_ry, body)
    if plan.stripes:
        mask = Image.new("L", img.size, 0)
        ellipse(ab_x, cy, ab_rx, ab_ry, 255, ImageDraw.Draw(mask))
        bands = Image.new("L", img.size, 0)
        band_draw = ImageDraw.Draw(bands)
        step = 2 * ab_rx / (plan.stripes + 1)
        for i in range(plan.stripes):
            x = ab_x - ab_rx + step * (i + 0.75)
            band_draw.rectangle([x, 0, x + step * 0.45, size], fill=255)
        stripe = _rgb(plan.stripe_hue, 0.6, plan.stripe_value)
        img.paste(stripe, (0, 0), ImageChops.multiply(mask, bands))
    if plan.waist > 0:  # the petiole: a thin link between abdomen and thorax
        draw.line([(ab_x + ab_rx, cy), (thorax_x, cy)], fill=body, width=max(1, int(size * 0.02)))
    ellipse(thorax_x, cy, 0.09 * unit, 0.065 * unit, body)
    head_x = thorax_x + 0.15 * unit
    ellipse(head_x, cy, 0.06 * unit, 0.055 * unit, dark if plan.value > 0.5 else body)
    for side in (-1, 1):  # antennae, bent
        elbow = (head_x + 0.08 * unit, cy + side * 0.05 * unit)
        tip = (head_x + 0.13 * unit, cy + side * 0.13 * unit)
        draw.line([(head_x, cy), elbow, tip], fill=dark, width=width)
    if plan.wings:  # pale, half transparent, swept back over the abdomen
        wing_layer = Image.new("RGBA", img.size, (0, 0, 0, 0))
        wing_draw = ImageDraw.Draw(wing_layer)
        for side in (-1, 1):
            ellipse(
                thorax_x - 0.14 * unit,
                cy + side * 0.12 * unit,
                0.17 * unit,
                0.07 * unit,
                (225, 235, 245, 150),
                wing_draw,
            )
        img = Image.alpha_composite(img, wing_layer)
    return img


def _background(width: int, height: int, r: np.random.Generator) -> Image.Image:
    """A gradient with leaves and petals: greens, blues, purples and pinks of middle to high
    brightness (no yellow and no near-black, the colours of bees and ants)."""

    def colour() -> np.ndarray:
        return hsv(r.uniform(0.22, 0.95), r.uniform(0.2, 0.7), r.uniform(0.45, 0.95))

    t = np.linspace(0, 1, height, dtype=np.float32)[:, None, None]
    grad = (colour() * (1 - t) + colour() * t) * np.ones((1, width, 1), np.float32)
    img = Image.fromarray((np.clip(grad, 0, 1) * 255).astype(np.uint8)).convert("RGBA")
    draw = ImageDraw.Draw(img)
    for _ in range(int(r.integers(2, 7))):
        x, y = r.uniform(0, width), r.uniform(0, height)
        rx, ry = r.uniform(0.05, 0.25) * width, r.uniform(0.03, 0.15) * height
        red, green, blue = (np.clip(colour(), 0, 1) * 255).astype(int)
        draw.ellipse([x - rx, y - ry, x + rx, y + ry], fill=(int(red), int(green), int(blue), 255))
    return img


def draw_image(spec: ClassesSpec, plan: BodyPlan, r: np.random.Generator) -> bytes:
    """One JPEG of an insect of ``plan`` drawn with the random stream ``r``."""
    width, height = spec.width, spec.height
    canvas = _background(width, height, r)
    length = int(min(width, height) * r.uniform(0.85, 1.15))
    insect = _insect(plan, length * SUPERSAMPLE, r)
    insect = insect.rotate(float(r.uniform(0, 360)), resample=Image.Resampling.BICUBIC, expand=True)
    side = max(1, int(math.ceil(insect.width / SUPERSAMPLE)))
    insect = insect.resize((side, side), Image.Resampling.LANCZOS)
    x = int(r.integers(-side // 5, max(1, width - side + side // 5)))
    y = int(r.integers(-side // 5, max(1, height - side + side // 5)))
    layer = Image.new("RGBA", canvas.size, (0, 0, 0, 0))
    layer.paste(insect, (x, y), insect)
    picture = np.asarray(Image.alpha_composite(canvas, layer).convert("RGB"), dtype=np.float32) / 255
    return jpeg_bytes(add_noise(picture, 0.025, r), blur=float(r.uniform(0.2, 0.7)))


def _write(out: str, spec: ClassesSpec) -> int:
    count = 0
    for index, name in enumerate(spec.class_names()):
        plan = body_plan(spec.seed, index)
        for split_index, (split, n) in enumerate(zip(SPLITS, (spec.num_train, spec.num_val))):
            folder = os.path.join(out, split, name)
            os.makedirs(folder)
            for k in range(n):
                data = draw_image(spec, plan, rng(spec.seed, 62, index, split_index, k))
                with open(os.path.join(folder, f"{k + 1:05d}.jpg"), "wb") as f:
                    f.write(data)
                count += 1
    with open(os.path.join(out, "README.txt"), "w", encoding="utf-8") as f:
        f.write(f"Synthetic insects written by fastreid.data.synthetic.classes ({spec}).\n")
    return count


def generate_classes(
    root: str,
    spec: ClassesSpec = ClassesSpec(),
    overwrite: bool = False,
    verbose: bool = False,
    replace_own: bool = True,
) -> str:
    """Write the synthetic set to ``<root>/hymenoptera_data``; returns that folder. An existing
    folder is replaced only when this generator wrote it (see :mod:`~fastreid.data.synthetic.tree`);
    ``overwrite`` renames anything else aside instead of refusing."""
    spec.validate()
    return write_generated_tree(
        os.path.join(root, FOLDER),
        lambda folder: _write(folder, spec),
        generator=__name__,
        what="synthetic Hymenoptera",
        info=asdict(spec),
        overwrite=overwrite,
        replace_own=replace_own,
        verbose=verbose,
    )


def main(argv: list[str] | None = None) -> int:
    return spec_command(
        argv,
        doc=__doc__,
        spec_type=ClassesSpec,
        generate=generate_classes,
        logger_name=__name__,
        small_help="a tiny set (12 images per class) for tests",
        helps={
            "num_classes": "ants, bees, then more insects",
            "num_train": "training images per class",
            "num_val": "validation images per class",
        },
        small_from=("seed", "num_classes"),
    )


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sys.exit(main())
