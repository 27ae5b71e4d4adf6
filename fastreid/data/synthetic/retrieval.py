"""A synthetic CUB-200-2011 for image retrieval, in upstream FastRetri's layout.

    python -m fastreid.data.synthetic.retrieval --root datasets     # datasets/CUB_200_2011

Each class is an object kind: a shape (disc, square, triangle, diamond, ring, cross), a main
colour (one of eight hues) and a pattern (plain, horizontal or vertical stripes, spots) in a
second colour. Classes are drawn from those 192 kinds without repeats; the first ones train, the
rest are the test classes, never seen in training, as in the real benchmark, so what a model
has to learn is what the kinds share: shape, hue and pattern, whatever the background.

Each image places its object at a random position, size and rotation, with slightly moved hues
and brightness, on a background of a random colour with clutter (blobs and lines of random
colours that are not the object's), sensor noise and JPEG compression: raw pixels and colour
histograms retrieve the class poorly, a trained embedding well (docs/retrieval.md has the
numbers). Same arguments, same bytes.

Layout (``dml_cross_entropy``'s, which upstream reads)::

    CUB_200_2011/
      train.txt    images/<NNN>.<kind>/<kind>_<MMMM>.jpg,<label>   labels 1..T (training classes)
      test.txt     the same, labels T+1..T+E (test classes)
      images/<NNN>.<kind>/*.jpg
"""

from __future__ import annotations

import logging
import math
import os
import sys
from dataclasses import asdict, dataclass, replace
from typing import ClassVar

import numpy as np
from PIL import Image, ImageDraw

from .common import (
    SyntheticSpecError,
    add_noise,
    hsv,
    jpeg_bytes,
    rng,
    spec_command,
    write_generated_tree,
)

__all__ = ["RetrievalSpec", "generate_cub", "object_kinds", "FOLDER", "main"]

FOLDER = "CUB_200_2011"
SHAPES = ("disc", "square", "triangle", "diamond", "ring", "cross")
HUES = ("red", "orange", "yellow", "green", "cyan", "blue", "purple", "pink")
PATTERNS = ("plain", "hstriped", "vstriped", "spotted")


@dataclass(frozen=True)
class RetrievalSpec:
    """How many training and test classes, images per class (drawn in ``min_images..max_images``),
    the image side in pixels and the seed."""

    num_train_classes: int = 48
    num_test_classes: int = 48
    min_images: int = 8
    max_images: int = 12
    size: int = 64
    seed: int = 0

    max_classes: ClassVar[int] = len(SHAPES) * len(HUES) * len(PATTERNS)

    @classmethod
    def small(cls, seed: int = 0) -> RetrievalSpec:
        """A tiny set for tests: 6 + 6 classes of 4..5 images, 32 x 32 pixels."""
        return replace(
            cls(), num_train_classes=6, num_test_classes=6, min_images=4, max_images=5, size=32, seed=seed
        )

    def validate(self) -> None:
        if self.num_train_classes < 1 or self.num_test_classes < 1:
            raise SyntheticSpecError("synthetic CUB: need at least one training and one test class")
        if self.num_train_classes + self.num_test_classes > self.max_classes:
            raise SyntheticSpecError(
                f"synthetic CUB: at most {self.max_classes} classes (shapes x hues x patterns), "
                f"got {self.num_train_classes} + {self.num_test_classes}"
            )
        if not 2 <= self.min_images <= self.max_images:
            raise SyntheticSpecError(
                "synthetic CUB: need 2 <= min_images <= max_images (a query needs a match)"
            )
        if self.size < 16:
            raise SyntheticSpecError(
                f"synthetic CUB: --size {self.size} is too small to draw in; use 16 or more"
            )


def object_kinds(spec: RetrievalSpec) -> list[tuple[int, int, int]]:
    """The classes in label order, ``(shape, hue, pattern)`` indices: all different, training first."""
    total = spec.num_train_classes + spec.num_test_classes
    order = rng(spec.seed, 1).permutation(spec.max_classes)[:total]
    n_hue, n_pat = len(HUES), len(PATTERNS)
    return [(int(k) // (n_hue * n_pat), int(k) // n_pat % n_hue, int(k) % n_pat) for k in order]


def kind_name(kind: tuple[int, int, int]) -> str:
    shape, hue, pattern = kind
    return f"{HUES[hue]}_{PATTERNS[pattern]}_{SHAPES[shape]}"


def _rgb(colour: np.ndarray) -> tuple[int, int, int]:
    c = np.clip(colour * 255 + 0.5, 0, 255).astype(int)
    return int(c[0]), int(c[1]), int(c[2])


def _shape_polygon(shape: int, cx: float, cy: float, r: float, angle: float) -> list[tuple[float, float]]:
    def ring_points(n: int, start: float, radius: float) -> list[tuple[float, float]]:
        return [
            (
                cx + radius * math.cos(start + angle + 2 * math.pi * i / n),
                cy + radius * math.sin(start + angle + 2 * math.pi * i / n),
            )
            for i in range(n)
        ]

    if shape == 1:  # square
        return ring_points(4, math.pi / 4, r)
    if shape == 2:  # triangle
        return ring_points(3, -math.pi / 2, r * 1.15)
    if shape == 3:  # diamond: a rhombus, long axis along the angle
        return [
            (cx + r * 1.2 * math.cos(angle), cy + r * 1.2 * math.sin(angle)),
            (cx + r * 0.6 * math.cos(angle + math.pi / 2), cy + r * 0.6 * math.sin(angle + math.pi / 2)),
            (cx - r * 1.2 * math.cos(angle), cy - r * 1.2 * math.sin(angle)),
            (cx - r * 0.6 * math.cos(angle + math.pi / 2), cy - r * 0.6 * math.sin(angle + math.pi / 2)),
        ]
    # cross: 12 corners of a plus sign
    w = r * 0.38
    pts = [
        (w, r),
        (w, w),
        (r, w),
        (r, -w),
        (w, -w),
        (w, -r),
        (-w, -r),
        (-w, -w),
        (-r, -w),
        (-r, w),
        (-w, w),
        (-w, r),
    ]
    ca, sa = math.cos(angle), math.sin(angle)
    return [(cx + x * ca - y * sa, cy + x * sa + y * ca) for x, y in pts]


def _object_mask(shape: int, size: int, cx: float, cy: float, r: float, angle: float) -> np.ndarray:
    mask = Image.new("L", (size, size), 0)
    draw = ImageDraw.Draw(mask)
    if shape in (0, 4):  # disc, ring
        draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=255)
        if shape == 4:
            inner = r * 0.5
            draw.ellipse([cx - inner, cy - inner, cx + inner, cy + inner], fill=0)
    else:
        draw.polygon(_shape_polygon(shape, cx, cy, r, angle), fill=255)
    return np.asarray(mask, dtype=np.float32)[..., None] / 255.0


def _pattern_mask(pattern: int, size: int, period: float, phase: float) -> np.ndarray:
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32)
    if pattern == 1:
        on = ((yy + phase) % period) < period / 2
    elif pattern == 2:
        on = ((xx + phase) % period) < period / 2
    elif pattern == 3:
        cy = ((yy + phase) % period) - period / 2
        cx = ((xx + phase * 0.7) % period) - period / 2
        on = cx * cx + cy * cy < (period * 0.3) ** 2
    else:
        on = np.zeros((size, size), bool)
    return on.astype(np.float32)[..., None]


def _far_hue(r: np.random.Generator, avoid: float) -> float:
    """A hue at least 1/8 of the circle away from ``avoid``: clutter never has the object's colour."""
    return float((avoid + r.uniform(0.125, 0.875)) % 1.0)


def render(kind: tuple[int, int, int], size: int, r: np.random.Generator) -> bytes:
    """One JPEG image of an object of ``kind`` drawn with the random stream ``r``."""
    shape, hue_i, pattern = kind
    hue = (hue_i / len(HUES) + r.normal(0, 0.012)) % 1.0

    # background: a random colour, a gradient, clutter blobs and lines
    bg = hsv(_far_hue(r, hue), r.uniform(0.1, 0.6), r.uniform(0.25, 0.85))
    yy = np.linspace(0, 1, size, dtype=np.float32)[:, None, None]
    img = np.broadcast_to(bg, (size, size, 3)) * (1 + r.uniform(-0.25, 0.25) * (yy - 0.5))
    canvas = Image.fromarray((np.clip(img, 0, 1) * 255).astype(np.uint8))
    draw = ImageDraw.Draw(canvas)
    for _ in range(int(r.integers(2, 6))):
        colour = _rgb(hsv(_far_hue(r, hue), r.uniform(0.2, 0.9), r.uniform(0.2, 0.95)))
        x, y = r.uniform(0, size, 2)
        if r.random() < 0.5:
            rad = r.uniform(0.05, 0.16) * size
            draw.ellipse(
                [x - rad, y - rad * r.uniform(0.4, 1), x + rad, y + rad * r.uniform(0.4, 1)], fill=colour
            )
        else:
            x2, y2 = r.uniform(0, size, 2)
            draw.line([x, y, x2, y2], fill=colour, width=max(1, int(size * r.uniform(0.02, 0.05))))
    img = np.asarray(canvas, dtype=np.float32) / 255.0

    # the object
    radius = size * r.uniform(0.2, 0.32)
    cx, cy = r.uniform(radius + 1, size - radius - 1, 2)
    angle = r.uniform(0, 2 * math.pi)
    mask = _object_mask(shape, size, cx, cy, radius, angle)
    main = hsv(hue, r.uniform(0.65, 0.95), r.uniform(0.6, 0.95))
    accent = hsv(r.random(), r.uniform(0.0, 0.3), r.uniform(0.85, 1.0))  # pale, near white
    period = size * r.uniform(0.1, 0.14)
    stripes = _pattern_mask(pattern, size, period, r.uniform(0, period))
    obj = main * (1 - stripes) + accent * stripes
    img = img * (1 - mask) + obj * mask
    img = img * r.uniform(0.8, 1.15)  # exposure
    img = add_noise(img, r.uniform(0.01, 0.04), r)
    return jpeg_bytes(img)


def _write_cub(out: str, spec: RetrievalSpec) -> int:
    kinds = object_kinds(spec)
    counts = rng(spec.seed, 2).integers(spec.min_images, spec.max_images + 1, size=len(kinds))
    lines: dict[str, list[str]] = {"train.txt": [], "test.txt": []}
    written = 0
    for c, (kind, count) in enumerate(zip(kinds, counts.tolist())):
        label = c + 1
        folder = f"{label:03d}.{kind_name(kind)}"
        os.makedirs(os.path.join(out, "images", folder))
        listing = lines["train.txt" if c < spec.num_train_classes else "test.txt"]
        for m in range(count):
            rel = f"images/{folder}/{kind_name(kind)}_{m + 1:04d}.jpg"
            with open(os.path.join(out, rel), "wb") as f:
                f.write(render(kind, spec.size, rng(spec.seed, 3, c, m)))
            listing.append(f"{rel},{label}")
            written += 1
    for name, listed in lines.items():
        with open(os.path.join(out, name), "w", encoding="utf-8") as f:
            f.write("\n".join(listed) + "\n")
    with open(os.path.join(out, "README.txt"), "w", encoding="utf-8") as f:
        f.write(f"Synthetic CUB-200-2011 written by fastreid.data.synthetic.retrieval ({spec}).\n")
    return written


def generate_cub(
    root: str,
    spec: RetrievalSpec = RetrievalSpec(),
    overwrite: bool = False,
    verbose: bool = False,
    replace_own: bool = True,
) -> str:
    """Write the synthetic set to ``<root>/CUB_200_2011``; returns that folder. An existing folder
    is replaced only when this generator wrote it (:mod:`~fastreid.data.synthetic.tree`);
    ``overwrite`` renames anything else aside instead of refusing."""
    spec.validate()
    return write_generated_tree(
        os.path.join(root, FOLDER),
        lambda folder: _write_cub(folder, spec),
        generator=__name__,
        what="synthetic CUB-200-2011",
        info=asdict(spec),
        overwrite=overwrite,
        replace_own=replace_own,
        verbose=verbose,
    )


def main(argv: list[str] | None = None) -> int:
    return spec_command(
        argv,
        doc=__doc__,
        spec_type=RetrievalSpec,
        generate=generate_cub,
        logger_name=__name__,
        small_help="a tiny set (12 classes, 32 x 32) for tests",
        helps={
            "min_images": "images per class, at least",
            "max_images": "images per class, at most",
            "size": "image side in pixels",
        },
    )


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sys.exit(main())
