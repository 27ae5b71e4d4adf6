"""A synthetic Market-1501: procedurally drawn persons seen by six cameras; and a second visual
domain, a synthetic DukeMTMC-reID seen by eight other cameras, for domain adaptation.

``python -m fastreid.data.synthetic --root datasets`` writes
``datasets/Market-1501-v15.09.15/{bounding_box_train,bounding_box_test,query}`` with Market's
file names (``PPPP_cCsS_FFFFFF_NN.jpg``, 128x64 JPEGs), distractors (pid 0000) and junk (pid -1)
in the gallery, so :class:`~fastreid.data.datasets.Market1501` reads it unchanged and demos need
no download.

``--domain B`` writes ``datasets/DukeMTMC-reID/`` instead (DukeMTMC's file names,
``PPPP_cC_fFFFFFFF.jpg``, cameras 1-8; :class:`~fastreid.data.datasets.DukeMTMC` reads it): the
same kind of persons, drawn from another palette (muted browns, olives and dull blues), in indoor
scenes under warm artificial light, further away, noisier and blurrier, more often from the side
(:func:`~.person_images.make_camera_b`). A model trained on domain A loses much of its accuracy
there, as a Market-1501 model does on DukeMTMC-reID (``make demo-uda``).

What makes it a re-ID problem rather than a colour lookup:

- identity: clothing colours and patterns, sleeve and trouser types, body proportions, hair,
  accessories (backpack, shoulder bag, hat, chest logo); several identities share colours;
- camera: background scene, colour cast and brightness, viewpoint mix (front / back / side, a
  backpack is only seen from the back), person scale and blur;
- image: pose (stride, arm swing), position jitter, mirroring, partial occlusion.

Raw-pixel matching does poorly (``--raw-pixel-baseline`` prints its Rank-1 / mAP) while a small
CNN trained for a few minutes does much better. Output is a pure function of the arguments: the
same seed gives the same bytes.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import ClassVar

import numpy as np
from PIL import Image

from fastreid.utils.errors import run_tool

from .common import JPEG_QUALITY as JPEG_QUALITY
from .common import (
    SpecChecks,
    SyntheticSpecError,
    add_overwrite_arguments,
    add_root_argument,
    add_size_arguments,
    earthy_palette,
    plan_identities,
    rng,
    write_generated_tree,
)
from .common import palette as make_palette
from .person_images import Camera, Identity, make_camera, make_camera_b, make_identity, render
from .person_images import H as H
from .person_images import W as W
from .tree import GeneratedTreeError

__all__ = [
    "DOMAINS",
    "PersonDomain",
    "SyntheticSpec",
    "SyntheticSpecError",
    "GeneratedTreeError",
    "generate_dukemtmc",
    "generate_market1501",
    "generate_persons",
    "raw_pixel_baseline",
    "main",
]

NUM_CAMS = 6
FOLDER = "Market-1501-v15.09.15"
SPLIT_DIRS = ("bounding_box_train", "bounding_box_test", "query")


@dataclass(frozen=True)
class SyntheticSpec(SpecChecks):
    """Sizes of the generated set. ``small()`` is for tests (a second or less)."""

    what: ClassVar[str] = "synthetic"
    unit: ClassVar[str] = "identity"
    max_ids: ClassVar[int] = 1500
    max_ids_reason: ClassVar[str] = "Market-1501 names allow at most 1500 identities (pids 2..1501)"

    num_train_ids: int = 180
    num_test_ids: int = 120
    min_images: int = 8
    max_images: int = 16
    max_query_per_id: int = 3
    num_distractors: int = 150
    num_junk: int = 60
    seed: int = 0

    @classmethod
    def small(cls, seed: int = 0) -> SyntheticSpec:
        return cls(
            num_train_ids=12,
            num_test_ids=8,
            min_images=4,
            max_images=6,
            max_query_per_id=2,
            num_distractors=5,
            num_junk=3,
            seed=seed,
        )


def _market_name(pid: int, cam: int, k: int, r: np.random.Generator) -> str:
    seq = int(r.integers(1, 7))
    frame = int(r.integers(0, 4000)) * 50 + k
    box = int(r.integers(1, 4))
    prefix = "-1" if pid == -1 else f"{pid:04d}"
    return f"{prefix}_c{cam}s{seq}_{frame:06d}_{box:02d}.jpg"


def _duke_name(pid: int, cam: int, k: int, r: np.random.Generator) -> str:
    frame = int(r.integers(0, 200000)) * 10 + k % 10
    prefix = "-1" if pid == -1 else f"{pid:04d}"
    return f"{prefix}_c{cam}_f{frame:07d}.jpg"


@dataclass(frozen=True)
class PersonDomain:
    """What sets a visual domain apart: its folder and file names, how many cameras and what they
    see, the palette its people dress from, and its own random streams (``seed_offset`` is added to
    the spec's seed)."""

    name: str
    folder: str
    what: str
    num_cams: int
    camera: Callable[[int, int], Camera]
    palette: Callable[[np.random.Generator], np.ndarray]
    file_name: Callable[[int, int, int, np.random.Generator], str]
    seed_offset: int = 0


DOMAINS: dict[str, PersonDomain] = {
    "A": PersonDomain(
        "A", FOLDER, "synthetic Market-1501", NUM_CAMS, make_camera, make_palette, _market_name
    ),
    "B": PersonDomain(
        "B",
        "DukeMTMC-reID",
        "synthetic DukeMTMC-reID",
        8,
        make_camera_b,
        earthy_palette,
        _duke_name,
        1_000_003,
    ),
}


def _plan(spec: SyntheticSpec, domain: PersonDomain = DOMAINS["A"]) -> list[tuple[str, int, int, int, str]]:
    """Every image to draw: (split dir, pid, camera 1..num_cams, image number, kind)."""
    cams = domain.num_cams
    r = rng(spec.seed + domain.seed_offset, 0)
    plan = [
        (*item, "person")
        for item in plan_identities(
            spec, r, (2, 1502), cams, ("bounding_box_train", "query", "bounding_box_test")
        )
    ]
    for i in range(spec.num_distractors):
        plan.append(("bounding_box_test", 0, int(r.integers(1, cams + 1)), i, "distractor"))
    for i in range(spec.num_junk):
        plan.append(("bounding_box_test", -1, int(r.integers(1, cams + 1)), i, "junk"))
    return plan


def generate_persons(
    root: str,
    spec: SyntheticSpec = SyntheticSpec(),
    domain: str = "A",
    overwrite: bool = False,
    verbose: bool = False,
    replace_own: bool = True,
) -> str:
    """Write the synthetic persons of ``domain`` ("A": ``<root>/Market-1501-v15.09.15``, "B":
    ``<root>/DukeMTMC-reID``); returns that folder.

    The folder gets a marker listing every file written (see
    :mod:`~fastreid.data.synthetic.tree`). An existing folder is replaced only when it
    carries that marker and nothing else was added to it; any other existing folder (a real
    Market-1501 or DukeMTMC-reID) raises :class:`GeneratedTreeError`, or with ``overwrite`` is
    renamed aside to ``<folder>.old-<time>``. Nothing the generator did not write is ever deleted.
    ``replace_own=False`` refuses to replace even a marked folder.
    """
    if domain not in DOMAINS:
        raise SyntheticSpecError(f"unknown domain {domain!r}: choose one of {', '.join(DOMAINS)}")
    spec.validate()
    look = DOMAINS[domain]
    info = asdict(spec) if domain == "A" else {**asdict(spec), "domain": domain}
    return write_generated_tree(
        os.path.join(root, look.folder),
        lambda folder: _write_persons(folder, spec, look),
        generator=__name__,
        what=look.what,
        info=info,
        overwrite=overwrite,
        replace_own=replace_own,
        verbose=verbose,
    )


def generate_market1501(
    root: str,
    spec: SyntheticSpec = SyntheticSpec(),
    overwrite: bool = False,
    verbose: bool = False,
    replace_own: bool = True,
) -> str:
    """Domain A, a synthetic Market-1501, in ``<root>/Market-1501-v15.09.15`` (:func:`generate_persons`)."""
    return generate_persons(root, spec, "A", overwrite, verbose, replace_own)


def generate_dukemtmc(
    root: str,
    spec: SyntheticSpec = SyntheticSpec(),
    overwrite: bool = False,
    verbose: bool = False,
    replace_own: bool = True,
) -> str:
    """Domain B, a synthetic DukeMTMC-reID, in ``<root>/DukeMTMC-reID`` (:func:`generate_persons`)."""
    return generate_persons(root, spec, "B", overwrite, verbose, replace_own)


def _write_persons(out: str, spec: SyntheticSpec, domain: PersonDomain) -> int:
    """The images and a README into ``out``; returns the number of images."""
    count = _write_person_images(out, spec, domain)
    with open(os.path.join(out, "README.txt"), "w", encoding="utf-8") as f:
        f.write(
            f"{domain.what[0].upper()}{domain.what[1:]} written by fastreid.data.synthetic.persons ({spec}).\n"
        )
    return count


def _write_person_images(out: str, spec: SyntheticSpec, domain: PersonDomain = DOMAINS["A"]) -> int:
    plan = _plan(spec, domain)
    for d in SPLIT_DIRS:
        os.makedirs(os.path.join(out, d))
    seed = spec.seed + domain.seed_offset
    palette = domain.palette(rng(seed, 4))
    cams = {c: domain.camera(seed, c) for c in range(1, domain.num_cams + 1)}
    idents: dict[int, Identity] = {}
    for n, (split, pid, cam, k, kind) in enumerate(plan):
        r = rng(seed, 5, pid + 2, cam, k, n if pid <= 0 else 0)
        ident = None
        if kind == "person":
            ident = idents.get(pid) or idents.setdefault(pid, make_identity(seed, pid, palette))
        elif kind == "distractor":
            ident = make_identity(seed, 100000 + k, palette)
        data = render(ident, cams[cam], r, kind)
        name = domain.file_name(pid, cam, k, r)
        path = os.path.join(out, split, name)
        if os.path.exists(path):  # a rare name clash: another box (A) or frame (B) number that is free
            stem = name[:-7] if domain.name == "A" else name[:-4]
            path = next(
                p
                for b in range(4, 100)
                if not os.path.exists(p := os.path.join(out, split, f"{stem}_{b:02d}.jpg"))
            )
        with open(path, "wb") as f:
            f.write(data)
    return len(plan)


def _load_split(folder: str, num_cams: int = NUM_CAMS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    # local: only --raw-pixel-baseline reads the set back, and fastreid.data.datasets imports
    # every data set module (the generator's command starts without them)
    from fastreid.data.datasets.market_format import parse_market_folder

    items = parse_market_folder(folder, num_cams=num_cams)
    feats = np.stack([np.asarray(Image.open(p).convert("RGB"), np.float32).ravel() for p, _, _ in items])
    feats -= feats.mean(axis=1, keepdims=True)
    feats /= np.linalg.norm(feats, axis=1, keepdims=True) + 1e-6
    return feats, np.array([i[1] for i in items]), np.array([i[2] for i in items])


def raw_pixel_baseline(data_dir: str, num_cams: int = NUM_CAMS) -> dict[str, float]:
    """Rank-1 and mAP (%) of matching query to gallery by the cosine of raw pixels.

    Market's protocol: gallery images of the query's identity from the query's camera are
    ignored, junk (-1) is not in the lists, distractors (0) count as wrong matches.
    """
    qf, qp, qc = _load_split(os.path.join(data_dir, "query"), num_cams)
    gf, gp, gc = _load_split(os.path.join(data_dir, "bounding_box_test"), num_cams)
    sim = qf @ gf.T
    rank1, aps = [], []
    for i in range(len(qf)):
        keep = ~((gp == qp[i]) & (gc == qc[i]))
        order = np.argsort(-sim[i][keep], kind="stable")
        match = (gp[keep] == qp[i])[order]
        if not match.any():
            continue
        rank1.append(float(match[0]))
        hits = np.cumsum(match)
        aps.append(float(np.mean(hits[match] / (np.nonzero(match)[0] + 1))))
    return {"Rank-1": 100 * float(np.mean(rank1)), "mAP": 100 * float(np.mean(aps)), "queries": len(rank1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_root_argument(parser)
    d = SyntheticSpec()
    add_size_arguments(parser, d, "identity")
    parser.add_argument(
        "--num-ids",
        type=int,
        default=None,
        help="total identities, split 60/40 into train/test (overrides --num-train-ids and --num-test-ids)",
    )
    parser.add_argument("--num-distractors", type=int, default=d.num_distractors)
    parser.add_argument("--num-junk", type=int, default=d.num_junk)
    parser.add_argument("--small", action="store_true", help="a tiny set (20 identities) for tests")
    parser.add_argument(
        "--domain",
        choices=sorted(DOMAINS),
        default="A",
        help="A: the synthetic Market-1501 (6 cameras); B: a second visual domain (other scenes, light, "
        "palette, 8 cameras) as DukeMTMC-reID, for domain adaptation",
    )
    add_overwrite_arguments(parser)
    parser.add_argument(
        "--raw-pixel-baseline",
        action="store_true",
        help="after writing, print Rank-1/mAP of raw-pixel matching",
    )
    args = parser.parse_args(argv)
    if args.small:
        spec = SyntheticSpec.small(seed=args.seed)
    else:
        n_train, n_test = args.num_train_ids, args.num_test_ids
        if args.num_ids is not None:
            n_train = max(1, round(args.num_ids * 0.6))
            n_test = max(1, args.num_ids - n_train)
        spec = SyntheticSpec(
            n_train,
            n_test,
            args.min_images,
            args.max_images,
            d.max_query_per_id,
            args.num_distractors,
            args.num_junk,
            args.seed,
        )

    def run() -> None:
        out = generate_persons(
            args.root,
            spec,
            args.domain,
            overwrite=args.overwrite,
            verbose=True,
            replace_own=not args.no_overwrite,
        )
        if args.raw_pixel_baseline:
            res = raw_pixel_baseline(out, DOMAINS[args.domain].num_cams)
            print(
                f"raw-pixel matching: Rank-1 {res['Rank-1']:.1f}%  mAP {res['mAP']:.1f}%  "
                f"({res['queries']} queries)"
            )

    return run_tool(run, logger_name=__name__)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sys.exit(main())
