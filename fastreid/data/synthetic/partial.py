"""Synthetic partial re-ID test sets: Partial-REID, Partial-iLIDS and Occluded-REID layouts.

``python -m fastreid.data.synthetic.partial --root datasets`` writes

```
datasets/Partial_REID/{partial_body_images,whole_body_images}/PPP_NNN.jpg
datasets/PartialiLIDS/{query,gallery}/PPP_N.jpg
datasets/OccludedREID/{query,gallery}/PPP_NN.jpg
```

read unchanged by :mod:`fastreid.projects.partial`'s ``PartialREID``, ``PartialiLIDS`` and
``OccludedREID``. The persons are drawn as the synthetic Market-1501 draws its persons
(:mod:`.person_images`, the same cameras and palette for the same seed), but are other persons:
a model trained on the synthetic Market-1501 meets them first here, as upstream trains on
Market-1501 and tests on the partial sets. Gallery images show whole bodies; queries show part
of one:

- Partial-REID: a crop of the body (the upper 40-75 %, or the left or right 55-75 %), at its
  own size (the loader resizes it);
- Partial-iLIDS: the upper 35-65 % of the body (the lower body hidden, as by luggage or a crowd);
- Occluded-REID: the whole image, a quarter to a half of it covered by an object in front of the
  person (a car or bench, a wall edge, a pole, another person).

Query and gallery images are taken by different cameras and numbered apart (queries 1..k,
galleries after them), so no gallery image is left out of a query's ranking. Output is a pure
function of the arguments: the same seed gives the same bytes.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from dataclasses import asdict, dataclass

import numpy as np

from .common import (
    SyntheticSpecError,
    hsv,
    rng,
    spec_command,
    write_generated_tree,
)
from .common import palette as make_palette
from .person_images import (
    Camera,
    H,
    Identity,
    W,
    _background,
    _draw_person,
    _ellipse,
    _fill,
    _finish,
    make_camera,
    make_identity,
)

__all__ = ["PartialSpec", "generate_partial", "SETS", "main"]

#: name -> (folder, query folder, gallery folder, identity offset, digits of the image number)
SETS = {
    "PartialREID": ("Partial_REID", "partial_body_images", "whole_body_images", 5000, 3),
    "PartialiLIDS": ("PartialiLIDS", "query", "gallery", 6000, 1),
    "OccludedREID": ("OccludedREID", "query", "gallery", 7000, 2),
}
NUM_CAMS = 6

_YY, _XX = np.mgrid[0:H, 0:W].astype(np.float32)


@dataclass(frozen=True)
class PartialSpec:
    """Persons per set and images per person (query and gallery each; Partial-iLIDS has one of
    each, as the real set). ``small()`` is for tests."""

    num_partial_reid_ids: int = 60
    num_ilids_ids: int = 119
    num_occluded_ids: int = 100
    images_per_id: int = 5
    seed: int = 0

    @classmethod
    def small(cls, seed: int = 0) -> PartialSpec:
        return cls(num_partial_reid_ids=6, num_ilids_ids=8, num_occluded_ids=6, images_per_id=2, seed=seed)

    def ids(self, name: str) -> int:
        return {
            "PartialREID": self.num_partial_reid_ids,
            "PartialiLIDS": self.num_ilids_ids,
            "OccludedREID": self.num_occluded_ids,
        }[name]

    def images(self, name: str) -> int:
        return 1 if name == "PartialiLIDS" else self.images_per_id

    def validate(self) -> None:
        for name in SETS:
            if not 1 <= self.ids(name) <= 999:
                raise SyntheticSpecError(
                    f"synthetic {name}: need 1 to 999 persons (three-digit names), got {self.ids(name)}"
                )
        if not 1 <= self.images_per_id <= 9:
            raise SyntheticSpecError(
                f"synthetic partial sets: images_per_id must be 1..9, got {self.images_per_id}"
            )


def _whole(ident: Identity, cam: Camera, r: np.random.Generator) -> np.ndarray:
    img = _background(cam, r)
    _draw_person(img, ident, cam, r)
    return img[:, ::-1].copy() if r.random() < 0.5 else img


def _partial_crop(img: np.ndarray, r: np.random.Generator) -> np.ndarray:
    """Partial-REID's query: the upper part of the body (2 in 3), else its left or right part."""
    if r.random() < 2 / 3:
        return img[: int(round(H * r.uniform(0.4, 0.75)))]
    width = int(round(W * r.uniform(0.55, 0.75)))
    return img[:, :width] if r.random() < 0.5 else img[:, W - width :]


def _upper_body(img: np.ndarray, r: np.random.Generator) -> np.ndarray:
    """Partial-iLIDS's query: the upper part, the lower body hidden."""
    return img[: int(round(H * r.uniform(0.35, 0.65)))]


def _occlude(img: np.ndarray, r: np.random.Generator) -> np.ndarray:
    """Occluded-REID's query: a quarter to a half of the image covered by something in front."""
    colour = hsv(r.random(), r.uniform(0, 0.7), r.uniform(0.1, 0.9))
    kind = int(r.integers(4))
    if kind == 0:  # a car or a bench in front of the legs
        mask = r.uniform(0.5, 0.72) * H <= _YY
    elif kind == 1:  # a wall edge or a door on one side
        edge = r.uniform(0.25, 0.5) * W
        mask = edge > _XX if r.random() < 0.5 else edge > (W - 1 - _XX)
    elif kind == 2:  # a wide pole or a sign post
        x0, w = r.uniform(0.1, 0.5) * W, r.uniform(0.3, 0.45) * W
        mask = (x0 <= _XX) & (x0 + w > _XX)
    else:  # another person passing in front
        cx = r.uniform(0.15, 0.85) * W
        mask = _ellipse(cx, r.uniform(0.45, 0.7) * H, r.uniform(0.3, 0.45) * W, r.uniform(0.3, 0.45) * H)
    img = img.copy()
    _fill(img, mask, colour)
    return img


_QUERY_VIEW = {"PartialREID": _partial_crop, "PartialiLIDS": _upper_body, "OccludedREID": _occlude}


def _write_set(out: str, name: str, spec: PartialSpec) -> int:
    _, query_dir, gallery_dir, offset, digits = SETS[name]
    for d in (query_dir, gallery_dir):
        os.makedirs(os.path.join(out, d))
    palette = make_palette(rng(spec.seed, 4))  # the synthetic Market-1501's palette
    cams = {c: make_camera(spec.seed, c) for c in range(1, NUM_CAMS + 1)}
    per = spec.images(name)
    count = 0
    for pid in range(1, spec.ids(name) + 1):
        ident = make_identity(spec.seed, offset + pid, palette)
        r = rng(spec.seed, 11, offset + pid)
        query_cams = r.choice(np.arange(1, NUM_CAMS + 1), size=2, replace=False)
        gallery_cams = [c for c in range(1, NUM_CAMS + 1) if c not in query_cams]
        for k in range(2 * per):
            is_query = k < per
            cam = cams[int(query_cams[k % 2]) if is_query else int(gallery_cams[k % len(gallery_cams)])]
            img = _whole(ident, cam, r)
            if is_query:
                img = _QUERY_VIEW[name](img, r)
            folder = query_dir if is_query else gallery_dir
            with open(os.path.join(out, folder, f"{pid:03d}_{k + 1:0{digits}d}.jpg"), "wb") as f:
                f.write(_finish(img, cam, r))
            count += 1
    with open(os.path.join(out, "README.txt"), "w", encoding="utf-8") as f:
        f.write(f"Synthetic {name} written by fastreid.data.synthetic.partial ({spec}).\n")
    return count


def generate_partial(
    root: str,
    spec: PartialSpec = PartialSpec(),
    overwrite: bool = False,
    verbose: bool = False,
    replace_own: bool = True,
    sets: tuple[str, ...] = tuple(SETS),
) -> list[str]:
    """Write the synthetic partial sets ``sets`` under ``root``; returns their folders. An existing
    folder is replaced only when this generator wrote it (see :mod:`~fastreid.data.synthetic.tree`);
    ``overwrite`` renames anything else aside instead of refusing."""
    spec.validate()
    unknown = [s for s in sets if s not in SETS]
    if unknown:
        raise SyntheticSpecError(f"unknown partial set(s) {unknown}; choose from {', '.join(SETS)}")
    folders = []
    for name in sets:
        folders.append(
            write_generated_tree(
                os.path.join(root, SETS[name][0]),
                functools.partial(_write_set, name=name, spec=spec),
                generator=__name__,
                what=f"synthetic {name}",
                info={**asdict(spec), "set": name},
                overwrite=overwrite,
                replace_own=replace_own,
                verbose=verbose,
            )
        )
    return folders


def main(argv: list[str] | None = None) -> int:
    return spec_command(
        argv,
        doc=__doc__,
        spec_type=PartialSpec,
        generate=generate_partial,
        logger_name=__name__,
        small_help="tiny sets (20 persons) for tests",
        helps={
            "seed": "the synthetic Market-1501's seed draws the same cameras",
            "images_per_id": "query and gallery images per person",
        },
    )


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sys.exit(main())
