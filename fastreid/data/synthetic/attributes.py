"""A synthetic PA-100K: persons drawn with known attributes, in PA-100K's layout and names.

``python -m fastreid.data.synthetic.attributes --root datasets`` writes::

    datasets/PA-100K/data/000001.jpg ...   128x64 JPEGs, training images first, then val, then test
    datasets/PA-100K/annotation.mat        PA-100K's keys: train/val/test_images_name (N x 1 cells),
                                           train/val/test_label (N x 26, 0/1), attributes (26 x 1 cell)

so that the ``PA100K`` data set (``fastreid.projects.attr``) reads it unchanged and
``configs/Attr/pa100.yml`` trains on it with no download.

Each person is drawn by :mod:`~fastreid.data.synthetic.person_images` from an identity whose
attributes are drawn first and then decide the picture: a female-like person has narrower
shoulders, wider hips, mostly long hair and sometimes a skirt; a child is short with a larger
head; an older person has grey hair; bags, hats, glasses, sleeves, patterns, coats and boots are
drawn when set. Every image is labelled with the 26 attributes of PA-100K as they are visible in
it: the viewpoint (front / side / back) is the one drawn, glasses and a held object are not seen
from behind, a chest logo only from the front. Cameras, poses, mirroring and occluders vary per
image as in the synthetic Market-1501. Output is a pure function of the arguments.
"""

from __future__ import annotations

import io
import logging
import os
import sys
from dataclasses import asdict, dataclass, replace
from typing import ClassVar

import numpy as np

from fastreid.utils.errors import UserError

from .common import (
    SpecChecks,
    SyntheticSpecError,
    hsv,
    rng,
    spec_command,
    write_generated_tree,
)
from .common import palette as make_palette
from .person_images import BACK, FRONT, SIDE, Identity, make_camera, make_identity, render_with_view
from .tree import GeneratedTreeError

__all__ = [
    "ATTRIBUTES",
    "FOLDER",
    "AttributeSpec",
    "GeneratedTreeError",
    "PersonAttributes",
    "SyntheticSpecError",
    "attribute_identity",
    "generate_pa100k",
    "labels_of",
    "main",
]

FOLDER = "PA-100K"
NUM_CAMS = 6
#: PA-100K's 26 attributes, in its order.
ATTRIBUTES = (
    "Female",
    "AgeOver60",
    "Age18-60",
    "AgeLess18",
    "Front",
    "Side",
    "Back",
    "Hat",
    "Glasses",
    "HandBag",
    "ShoulderBag",
    "Backpack",
    "HoldObjectsInFront",
    "ShortSleeve",
    "LongSleeve",
    "UpperStride",
    "UpperLogo",
    "UpperPlaid",
    "UpperSplice",
    "LowerStripe",
    "LowerPattern",
    "LongCoat",
    "Trousers",
    "Shorts",
    "Skirt&Dress",
    "boots",
)
SPLITS = ("train", "val", "test")
# A MAT-file (v5) starts with 116 bytes of text; scipy writes the time into them. Ours is fixed.
MAT_TEXT_BYTES = 116
MAT_TEXT = b"MATLAB 5.0 MAT-file, written by fastreid.data.synthetic.attributes"


class MissingScipyError(UserError, ImportError):
    """Writing annotation.mat needs scipy."""


@dataclass(frozen=True)
class AttributeSpec(SpecChecks):
    """Sizes of the generated set: persons per split, images per person. ``small()`` is for tests."""

    what: ClassVar[str] = "synthetic PA-100K"
    unit: ClassVar[str] = "person"
    max_ids: ClassVar[int] = 100000
    max_ids_reason: ClassVar[str] = "at most 100000 persons (PA-100K's size)"

    num_train_ids: int = 360
    num_val_ids: int = 40
    num_test_ids: int = 120
    min_images: int = 2
    max_images: int = 4
    seed: int = 0

    @classmethod
    def small(cls, seed: int = 0) -> AttributeSpec:
        return cls(num_train_ids=24, num_val_ids=4, num_test_ids=8, min_images=2, max_images=2, seed=seed)

    def validate(self) -> None:
        super().validate()
        if self.num_val_ids < 1:
            raise SyntheticSpecError(f"{self.what}: need at least one validation {self.unit}")


@dataclass(frozen=True)
class PersonAttributes:
    """What a person is, before it is drawn (the viewpoint-dependent labels come per image)."""

    female: bool
    age: int  # 0 over 60, 1 18-60, 2 under 18


def attribute_identity(seed: int, pid: int, palette: np.ndarray) -> tuple[Identity, PersonAttributes]:
    """The identity drawn for person ``pid``: :func:`make_identity`'s clothes and colours, with
    the body, hair and accessories its attributes decide."""
    base = make_identity(seed, pid, palette)
    r = rng(seed, 7, pid)

    def colour() -> np.ndarray:
        c = palette[r.integers(len(palette))]
        return np.clip(c + r.normal(0, 0.05, 3), 0, 1).astype(np.float32)

    def maybe(p: float) -> np.ndarray | None:
        return colour() if r.random() < p else None

    female = bool(r.random() < 0.45)
    age = int(r.choice(3, p=[0.12, 0.73, 0.15]))
    if female:
        bottom_type = int(r.choice(3, p=[0.45, 0.2, 0.35]))
        shoulder, hip = r.uniform(0.095, 0.12), r.uniform(0.115, 0.14)
        long_hair = bool(r.random() < 0.8)
    else:
        bottom_type = int(r.choice(2, p=[0.75, 0.25]))
        shoulder, hip = r.uniform(0.14, 0.17), r.uniform(0.08, 0.1)
        long_hair = bool(r.random() < 0.05)
    height, head = base.height, base.head
    hair = base.hair
    if age == 2:  # a child: short, a larger head
        height, head = r.uniform(0.62, 0.74), r.uniform(1.2, 1.35)
    elif age == 0:  # grey hair
        hair = hsv(0.08, r.uniform(0.0, 0.1), r.uniform(0.72, 0.9))
    long_coat = bool(r.random() < 0.12)
    lower_pattern = int(r.choice(3, p=[0.76, 0.12, 0.12]))
    ident = replace(
        base,
        bottom_type=bottom_type,
        long_sleeves=base.long_sleeves or long_coat,
        hair=hair,
        long_hair=long_hair,
        height=height,
        head=head,
        shoulder=shoulder,
        hip=hip,
        backpack=maybe(0.3),
        bag=maybe(0.25),
        hat=maybe(0.2),
        logo=maybe(0.3),
        glasses=bool(r.random() < 0.2),
        handbag=maybe(0.18),
        held=maybe(0.15),
        lower_pattern=lower_pattern,
        lower2=colour() if lower_pattern else None,
        long_coat=long_coat,
        boots=bool(r.random() < 0.18),
    )
    return ident, PersonAttributes(female=female, age=age)


def labels_of(ident: Identity, person: PersonAttributes, view: int) -> np.ndarray:
    """The 26 PA-100K labels (uint8 0/1, in :data:`ATTRIBUTES` order) of ``ident`` seen from ``view``."""
    on = {
        "Female": person.female,
        "AgeOver60": person.age == 0,
        "Age18-60": person.age == 1,
        "AgeLess18": person.age == 2,
        "Front": view == FRONT,
        "Side": view == SIDE,
        "Back": view == BACK,
        "Hat": ident.hat is not None,
        "Glasses": ident.glasses and view != BACK,
        "HandBag": ident.handbag is not None,
        "ShoulderBag": ident.bag is not None,
        "Backpack": ident.backpack is not None,
        "HoldObjectsInFront": ident.held is not None and view != BACK,
        "ShortSleeve": not ident.long_sleeves,
        "LongSleeve": ident.long_sleeves,
        "UpperStride": ident.pattern in (1, 2),
        "UpperLogo": ident.logo is not None and view == FRONT,
        "UpperPlaid": ident.pattern == 4,
        "UpperSplice": ident.pattern == 3,
        "LowerStripe": ident.lower_pattern == 1,
        "LowerPattern": ident.lower_pattern == 2,
        "LongCoat": ident.long_coat,
        "Trousers": ident.bottom_type == 0,
        "Shorts": ident.bottom_type == 1,
        "Skirt&Dress": ident.bottom_type == 2,
        "boots": ident.boots,
    }
    return np.array([bool(on[name]) for name in ATTRIBUTES], dtype=np.uint8)


def _plan(spec: AttributeSpec) -> list[tuple[str, int, int, int]]:
    """Every image: (split, person id, camera 1..6, image number of the person)."""
    r = rng(spec.seed, 0)
    sizes = (spec.num_train_ids, spec.num_val_ids, spec.num_test_ids)
    total = sum(sizes)
    pids = r.permutation(np.arange(1, total + 1))
    plan = []
    start = 0
    for split, size in zip(SPLITS, sizes):
        for pid in sorted(pids[start : start + size].tolist()):
            n_img = int(r.integers(spec.min_images, spec.max_images + 1))
            cams = r.choice(np.arange(1, NUM_CAMS + 1), size=n_img, replace=n_img > NUM_CAMS)
            plan += [(split, pid, int(cam), k) for k, cam in enumerate(cams.tolist())]
        start += size
    return plan


def _cells(values: list[str]) -> np.ndarray:
    """A MATLAB N x 1 cell array of strings (what PA-100K's annotation.mat holds)."""
    cells = np.empty((len(values), 1), dtype=object)
    cells[:, 0] = values
    return cells


def _write_pa100k(out: str, spec: AttributeSpec) -> int:
    try:
        from scipy.io import savemat  # optional: scipy (the attr extra), only to write the .mat file
    except ImportError:
        raise MissingScipyError(
            "the synthetic PA-100K writes annotation.mat with scipy: pip install scipy"
        ) from None
    data_dir = os.path.join(out, "data")
    os.makedirs(data_dir)
    palette = make_palette(rng(spec.seed, 4))
    cams = {c: make_camera(spec.seed, c) for c in range(1, NUM_CAMS + 1)}
    people: dict[int, tuple[Identity, PersonAttributes]] = {}
    names: dict[str, list[str]] = {s: [] for s in SPLITS}
    labels: dict[str, list[np.ndarray]] = {s: [] for s in SPLITS}
    plan = _plan(spec)
    for n, (split, pid, cam, k) in enumerate(plan, 1):
        if pid not in people:
            people[pid] = attribute_identity(spec.seed, pid, palette)
        ident, person = people[pid]
        data, view = render_with_view(ident, cams[cam], rng(spec.seed, 8, pid, k), "person")
        assert view is not None
        name = f"{n:06d}.jpg"
        with open(os.path.join(data_dir, name), "wb") as f:
            f.write(data)
        names[split].append(name)
        labels[split].append(labels_of(ident, person, view))
    mat = {"attributes": _cells(list(ATTRIBUTES))}
    for split in SPLITS:
        mat[f"{split}_images_name"] = _cells(names[split])
        mat[f"{split}_label"] = np.stack(labels[split]).astype(np.uint8)
    buffer = io.BytesIO()
    savemat(buffer, mat)
    mat_bytes = bytearray(buffer.getvalue())
    mat_bytes[:MAT_TEXT_BYTES] = MAT_TEXT.ljust(MAT_TEXT_BYTES)  # scipy's header text holds the time
    with open(os.path.join(out, "annotation.mat"), "wb") as f:
        f.write(bytes(mat_bytes))
    with open(os.path.join(out, "README.txt"), "w", encoding="utf-8") as f:
        f.write(f"Synthetic PA-100K written by fastreid.data.synthetic.attributes ({spec}).\n")
    return len(plan)


def generate_pa100k(
    root: str,
    spec: AttributeSpec = AttributeSpec(),
    overwrite: bool = False,
    verbose: bool = False,
    replace_own: bool = True,
) -> str:
    """Write the synthetic set to ``<root>/PA-100K``; returns that folder. An existing folder is
    replaced only when this generator wrote it (see :mod:`~fastreid.data.synthetic.tree`);
    ``overwrite`` renames anything else aside instead of refusing."""
    spec.validate()
    return write_generated_tree(
        os.path.join(root, FOLDER),
        lambda folder: _write_pa100k(folder, spec),
        generator=__name__,
        what="synthetic PA-100K",
        info=asdict(spec),
        overwrite=overwrite,
        replace_own=replace_own,
        verbose=verbose,
    )


def main(argv: list[str] | None = None) -> int:
    return spec_command(
        argv,
        doc=__doc__,
        spec_type=AttributeSpec,
        generate=generate_pa100k,
        logger_name=__name__,
        small_help="a tiny set (36 persons) for tests",
        helps={
            "num_train_ids": "training persons",
            "num_val_ids": "validation persons",
            "num_test_ids": "test persons",
            "min_images": "images per person, at least",
            "max_images": "images per person, at most",
        },
    )


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sys.exit(main())
