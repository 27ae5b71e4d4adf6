"""What the synthetic data set generators share: seeding, colours, the identity plan, the last
steps of every image (sensor noise, blur, JPEG), the size checks, writing the tree, and the
command-line options.

The generators themselves: :mod:`~fastreid.data.synthetic.persons` (persons, Market-1501's
layout) and :mod:`~fastreid.data.synthetic.vehicles` (vehicles, VeRi / VehicleID /
VERI-Wild layouts).
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import os
import time
from typing import Any, Callable, ClassVar, Optional

import numpy as np
from PIL import Image, ImageFilter

from fastreid.utils.errors import UserError, run_tool

from .tree import generated_tree

__all__ = [
    "SyntheticSpecError",
    "SpecChecks",
    "rng",
    "hsv",
    "palette",
    "earthy_palette",
    "plan_identities",
    "add_noise",
    "jpeg_bytes",
    "write_generated_tree",
    "add_root_argument",
    "add_size_arguments",
    "add_overwrite_arguments",
    "spec_command",
]

JPEG_QUALITY = 90


class SyntheticSpecError(UserError, ValueError):
    """Sizes the generator cannot honour."""

    exit_code = 2


class SpecChecks:
    """``validate()`` of a generator's spec dataclass (fields ``num_train_ids``, ``num_test_ids``,
    ``min_images``, ``max_images``); the class variables name things in the messages."""

    what: ClassVar[str]  # the generator, e.g. "synthetic vehicles"
    unit: ClassVar[str]  # one identity, e.g. "vehicle"
    max_ids: ClassVar[int]
    max_ids_reason: ClassVar[str]  # why at most max_ids

    num_train_ids: int
    num_test_ids: int
    min_images: int
    max_images: int

    def validate(self) -> None:
        if self.num_train_ids < 1 or self.num_test_ids < 1:
            raise SyntheticSpecError(f"{self.what}: need at least one training and one test {self.unit}")
        if self.num_train_ids + self.num_test_ids > self.max_ids:
            raise SyntheticSpecError(f"{self.what}: {self.max_ids_reason}")
        if not 2 <= self.min_images <= self.max_images:
            raise SyntheticSpecError(
                f"{self.what}: need 2 <= min_images <= max_images (each {self.unit} is seen by >= 2 cameras)"
            )


def rng(*parts: int) -> np.random.Generator:
    """A numpy generator seeded from ``parts`` (the generator's seed, then what is being drawn)."""
    return np.random.default_rng(np.random.SeedSequence([int(p) & 0xFFFFFFFF for p in parts]))


def hsv(h: float, s: float, v: float) -> np.ndarray:
    """One HSV colour (components in 0..1) as RGB floats."""
    i = int(h * 6) % 6
    f = h * 6 - int(h * 6)
    p, q, t = v * (1 - s), v * (1 - s * f), v * (1 - s * (1 - f))
    rgb = [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)][i]
    return np.array(rgb, dtype=np.float32)


def palette(r: np.random.Generator, n: int = 24) -> np.ndarray:
    """A shared palette: identities draw their colours from it, so colour alone is ambiguous."""
    colours = [hsv(r.random(), r.uniform(0.35, 0.95), r.uniform(0.3, 0.95)) for _ in range(n - 4)]
    greys_and_navy = ((0.1, 0.1, 0.12), (0.9, 0.9, 0.88), (0.5, 0.5, 0.52), (0.2, 0.22, 0.4))
    colours += [np.array(c, np.float32) for c in greys_and_navy]
    return np.stack(colours)


def earthy_palette(r: np.random.Generator, n: int = 24) -> np.ndarray:
    """The second domain's palette: as many colours as :func:`palette`'s, most of them in warm and
    blue bands (browns, olives, oranges, blues, purples) and a little less saturated, and other
    greys."""
    bands = ((0.0, 0.15), (0.15, 0.3), (0.5, 0.7), (0.75, 0.95))
    colours = []
    for _ in range(n - 4):
        lo, hi = bands[int(r.integers(len(bands)))]
        colours.append(hsv(r.uniform(lo, hi), r.uniform(0.3, 0.85), r.uniform(0.3, 0.9)))
    greys = ((0.16, 0.15, 0.13), (0.8, 0.78, 0.74), (0.45, 0.43, 0.4), (0.3, 0.26, 0.2))
    colours += [np.array(c, np.float32) for c in greys]
    return np.stack(colours)


def plan_identities(
    spec, r: np.random.Generator, ids: tuple[int, int], num_cams: int, splits: tuple[str, str, str]
) -> list[tuple[str, int, int, int]]:
    """Images of the identities of ``spec`` (``num_train_ids``, ``num_test_ids``, ``min_images``,
    ``max_images``, ``max_query_per_id``): ``(split folder, id, camera 1..num_cams, image number)``.

    Ids are drawn from ``range(*ids)``; each identity is seen by 2 or more cameras; a test
    identity's first image from each of its first ``max_query_per_id`` cameras is a query, the
    rest gallery. ``splits`` names the (train, query, gallery) folders.
    """
    train_dir, query_dir, gallery_dir = splits
    total = spec.num_train_ids + spec.num_test_ids
    pids = np.sort(r.choice(np.arange(*ids), size=total, replace=False))
    is_test = np.zeros(total, bool)
    is_test[r.choice(total, size=spec.num_test_ids, replace=False)] = True
    plan = []
    for pid, test in zip(pids.tolist(), is_test.tolist()):
        n_img = int(r.integers(spec.min_images, spec.max_images + 1))
        n_cam = int(r.integers(2, min(num_cams, n_img) + 1))
        cams = np.sort(r.choice(np.arange(1, num_cams + 1), size=n_cam, replace=False))
        per_cam = np.ones(n_cam, int) + np.bincount(r.integers(0, n_cam, n_img - n_cam), minlength=n_cam)
        k = 0
        for cam_i, (cam, count) in enumerate(zip(cams.tolist(), per_cam.tolist())):
            for j in range(count):
                if not test:
                    split = train_dir
                elif j == 0 and cam_i < spec.max_query_per_id:
                    split = query_dir
                else:
                    split = gallery_dir
                plan.append((split, pid, cam, k))
                k += 1
    return plan


def add_noise(img: np.ndarray, sigma: float, r: np.random.Generator) -> np.ndarray:
    """``img`` plus Gaussian sensor noise of ``sigma`` (none, and no draw, when ``sigma`` is 0)."""
    if sigma > 0:
        img = img + r.normal(0, sigma, img.shape).astype(np.float32)
    return img


def jpeg_bytes(img: np.ndarray, blur: Optional[float] = None) -> bytes:
    """An H x W x 3 float image (0..1, clipped) as JPEG bytes, Gaussian-blurred by ``blur`` first
    unless it is None."""
    pil = Image.fromarray((np.clip(img, 0, 1) * 255 + 0.5).astype(np.uint8))
    if blur is not None:
        pil = pil.filter(ImageFilter.GaussianBlur(blur))
    buf = io.BytesIO()
    pil.save(buf, format="JPEG", quality=JPEG_QUALITY)
    return buf.getvalue()


def write_generated_tree(
    out: str,
    write: Callable[[str], int],
    *,
    generator: str,
    what: str,
    info: dict[str, Any],
    overwrite: bool,
    replace_own: bool,
    verbose: bool,
) -> str:
    """Run ``write(folder)`` (returns how many images it wrote) into a fresh tree that then
    replaces ``out`` under the rules of :mod:`~fastreid.data.synthetic.tree`; returns
    ``out``. ``verbose`` prints what was moved aside and written."""
    start = time.perf_counter()
    with generated_tree(
        out, generator=generator, what=what, info=info, overwrite=overwrite, replace_own=replace_own
    ) as tree:
        count = write(tree.path)
    if verbose:
        if tree.moved_aside:
            print(f"moved the existing {out} aside to {tree.moved_aside}")
        print(f"wrote {count} images to {out} in {time.perf_counter() - start:.1f} s")
    return out


def add_root_argument(parser: argparse.ArgumentParser) -> None:
    """``--root``, the datasets folder, for every generator."""
    parser.add_argument(
        "--root",
        default=os.environ.get("FASTREID_DATASETS", "datasets"),
        help="datasets folder (default: $FASTREID_DATASETS or 'datasets')",
    )


def add_size_arguments(parser: argparse.ArgumentParser, defaults: Any, unit: str) -> None:
    """``--seed``, ``--num-train-ids``, ``--num-test-ids``, ``--min-images``, ``--max-images``
    with the defaults of the spec ``defaults``; ``unit`` names one identity in the help."""
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--num-train-ids", type=int, default=defaults.num_train_ids)
    parser.add_argument("--num-test-ids", type=int, default=defaults.num_test_ids)
    parser.add_argument(
        "--min-images", type=int, default=defaults.min_images, help=f"images per {unit}, at least"
    )
    parser.add_argument(
        "--max-images", type=int, default=defaults.max_images, help=f"images per {unit}, at most"
    )


def add_overwrite_arguments(parser: argparse.ArgumentParser) -> None:
    """``--overwrite`` / ``--no-overwrite``, the same for every generator."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--overwrite",
        action="store_true",
        help="if the output folder holds data this generator did not write, move it aside "
        "to <folder>.old-<time> (nothing is deleted) instead of refusing",
    )
    group.add_argument(
        "--no-overwrite",
        action="store_true",
        help="refuse even when the folder is one this generator wrote earlier",
    )


def spec_command(
    argv: Optional[list[str]],
    *,
    doc: str,
    spec_type: Any,
    generate: Callable[..., Any],
    logger_name: str,
    small_help: str,
    helps: Optional[dict[str, str]] = None,
    flags: Optional[dict[str, str]] = None,
    small_from: tuple[str, ...] = ("seed",),
) -> int:
    """The command of a generator whose sizes are the integer fields of the dataclass
    ``spec_type``: ``--root``, one ``--<field>`` per field (default the dataclass's, help from
    ``helps``, flag name from ``flags`` where it is not the field's), ``--small``
    (``spec_type.small(...)`` with the fields named in ``small_from``), ``--overwrite`` /
    ``--no-overwrite``; then ``generate(root, spec, ...)`` as a tool (a bad size is one line)."""
    parser = argparse.ArgumentParser(
        description=doc.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_root_argument(parser)
    defaults = spec_type()
    names = [f.name for f in dataclasses.fields(spec_type)]
    for name in names:
        flag = (flags or {}).get(name, "--" + name.replace("_", "-"))
        default = getattr(defaults, name)
        parser.add_argument(
            flag, dest=name, type=type(default), default=default, help=(helps or {}).get(name)
        )
    parser.add_argument("--small", action="store_true", help=small_help)
    add_overwrite_arguments(parser)
    args = parser.parse_args(argv)
    values = {name: getattr(args, name) for name in names}
    spec = spec_type.small(**{k: values[k] for k in small_from}) if args.small else spec_type(**values)

    def run() -> None:
        generate(args.root, spec, overwrite=args.overwrite, verbose=True, replace_own=not args.no_overwrite)

    return run_tool(run, logger_name=logger_name)
