"""A synthetic VeRi-776: procedurally drawn vehicles seen by twenty road cameras.

``python -m fastreid.data.synthetic.vehicles --root datasets`` writes
``datasets/veri/{image_train,image_query,image_test}`` with VeRi's file names
(``VVVV_cCCC_FFFFFFFF_N.jpg``, vehicle id, camera c001-c020, frame) and its name lists
(``name_train.txt``, ``name_query.txt``, ``name_test.txt``), so
:class:`~fastreid.data.datasets.VeRi` reads it unchanged and ``configs/VeRi/*`` train and evaluate
with no download. The default set (60 training and 40 test vehicles, about 1000 images of 64x64)
is written in a few seconds. ``--layout vehicleid`` and ``--layout veriwild`` write the same
vehicles in VehicleID's and VERI-Wild's layouts (list files, Small/Medium/Large test lists as
nested thirds of the test vehicles) for ``configs/VehicleID`` and ``configs/VERIWild``.

What makes it a re-ID problem: vehicles share body colours and types (sedan, SUV, van, bus,
truck), and differ by details (a roof rack, a stripe, a sticker on the windscreen, the shade of the
glass, wheel style); cameras differ by road colour and texture, colour cast, brightness, viewpoint
mix (front / rear / side), scale and blur; each image adds position jitter, mirroring and partial
occlusion. Same seed, same bytes.

The folder follows the generators' rule (see :mod:`~fastreid.data.synthetic.tree`): it
carries a marker listing every file written, only such a folder is replaced, and anything else is a
refusal naming the folder (``--overwrite`` renames it aside; nothing is deleted).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from dataclasses import asdict, dataclass
from typing import ClassVar

from fastreid.utils.errors import run_tool

from .common import (
    SpecChecks,
    SyntheticSpecError,
    add_overwrite_arguments,
    add_root_argument,
    add_size_arguments,
    plan_identities,
    rng,
    write_generated_tree,
)
from .common import palette as make_palette
from .vehicle_images import S as S
from .vehicle_images import Vehicle, make_camera, make_vehicle, render

__all__ = ["VehicleSpec", "LAYOUTS", "generate_vehicles", "generate_veri", "main"]

NUM_CAMS = 20
FOLDER = "veri"
SPLITS = {"image_train": "name_train.txt", "image_query": "name_query.txt", "image_test": "name_test.txt"}


@dataclass(frozen=True)
class VehicleSpec(SpecChecks):
    """Sizes of the generated set. ``small()`` is for tests (well under a second)."""

    what: ClassVar[str] = "synthetic vehicles"
    unit: ClassVar[str] = "vehicle"
    max_ids: ClassVar[int] = 776
    max_ids_reason: ClassVar[str] = "VeRi ids go up to 776, so at most 776 vehicles"

    num_train_ids: int = 60
    num_test_ids: int = 40
    min_images: int = 6
    max_images: int = 14
    max_query_per_id: int = 2
    seed: int = 0

    @classmethod
    def small(cls, seed: int = 0) -> VehicleSpec:
        return cls(num_train_ids=8, num_test_ids=6, min_images=4, max_images=6, max_query_per_id=1, seed=seed)


def _plan(spec: VehicleSpec) -> list[tuple[str, int, int, int]]:
    """Every image to draw: (split folder, vehicle id 1..776, camera 1..20, image number)."""
    return plan_identities(
        spec, rng(spec.seed, 10), (1, 777), NUM_CAMS, ("image_train", "image_query", "image_test")
    )


def _rendered(spec: VehicleSpec):
    """``(split, vehicle id, camera, image number, random generator, JPEG bytes)`` of every image."""
    palette = make_palette(rng(spec.seed, 13), n=16)
    cams = {c: make_camera(spec.seed, c) for c in range(1, NUM_CAMS + 1)}
    vehicles: dict[int, Vehicle] = {}
    for split, vid, cam, k in _plan(spec):
        vehicle = vehicles.get(vid) or vehicles.setdefault(vid, make_vehicle(spec.seed, vid, palette))
        r = rng(spec.seed, 14, vid, cam, k)
        yield split, vid, cam, k, r, render(vehicle, cams[cam], r)


def _write(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def _lines(items) -> bytes:
    return "".join(f"{item}\n" for item in items).encode()


def _write_veri(out: str, spec: VehicleSpec) -> int:
    names: dict[str, list[str]] = {split: [] for split in SPLITS}
    for split in SPLITS:
        os.makedirs(os.path.join(out, split))
    for split, vid, cam, k, r, data in _rendered(spec):
        name = f"{vid:04d}_c{cam:03d}_{int(r.integers(0, 10**5)) * 100 + k:08d}_{k % 2}.jpg"
        _write(os.path.join(out, split, name), data)
        names[split].append(name)
    for split, list_name in SPLITS.items():
        _write(os.path.join(out, list_name), _lines(sorted(names[split])))
    return sum(len(v) for v in names.values())


def _size_lists(test_vids: list[int], sizes: tuple[int, ...]) -> dict[int, set]:
    """Nested test subsets standing in for the small / medium / large lists: 1/3, 2/3, all."""
    n = len(test_vids)
    return {
        size: set(test_vids[: max(1, round(n * (i + 1) / 3)) if i < 2 else n]) for i, size in enumerate(sizes)
    }


def _write_vehicleid(out: str, spec: VehicleSpec) -> int:
    train: list[tuple[str, int]] = []
    test: list[tuple[str, int]] = []
    for n, (split, vid, _, _, _, data) in enumerate(_rendered(spec), 1):
        _write(os.path.join(out, "image", f"{n:07d}.jpg"), data)
        (train if split == "image_train" else test).append((f"{n:07d}", vid))
    split_dir = os.path.join(out, "train_test_split")
    _write(os.path.join(split_dir, "train_list.txt"), _lines(f"{i} {v}" for i, v in train))
    subsets = _size_lists(sorted({v for _, v in test}), (800, 1600, 2400))
    subsets[13164] = {v for _, v in test}
    for size, vids in subsets.items():
        _write(
            os.path.join(split_dir, f"test_list_{size}.txt"), _lines(f"{i} {v}" for i, v in test if v in vids)
        )
    return len(train) + len(test)


def _write_veriwild(out: str, spec: VehicleSpec) -> int:
    info = ["id/image;Camera ID;Time;Model;Type;Color"]
    train: list[tuple[str, int]] = []
    query: list[tuple[str, int]] = []
    gallery: list[tuple[str, int]] = []
    for n, (split, vid, cam, k, _, data) in enumerate(_rendered(spec), 1):
        key = f"{vid:05d}/{n:06d}"
        _write(os.path.join(out, "images", f"{key}.jpg"), data)
        info.append(f"{key};{cam:03d};2018-03-{1 + k % 28:02d} 12:00:00;model;type;colour")
        {"image_train": train, "image_query": query, "image_test": gallery}[split].append((key, vid))
    split_dir = os.path.join(out, "train_test_split")
    _write(os.path.join(split_dir, "vehicle_info.txt"), _lines(info))
    _write(os.path.join(split_dir, "train_list.txt"), _lines(key for key, _ in train))
    for size, vids in _size_lists(sorted({v for _, v in query}), (3000, 5000, 10000)).items():
        _write(
            os.path.join(split_dir, f"test_{size}_query.txt"), _lines(key for key, v in query if v in vids)
        )
        _write(os.path.join(split_dir, f"test_{size}.txt"), _lines(key for key, v in gallery if v in vids))
    return len(info) - 1


#: layout -> (folder under the root, writer, what the marker calls it)
LAYOUTS = {
    "veri": (FOLDER, _write_veri, "synthetic VeRi"),
    "vehicleid": ("vehicleid", _write_vehicleid, "synthetic VehicleID"),
    "veriwild": ("VERI-Wild", _write_veriwild, "synthetic VERI-Wild"),
}


def generate_vehicles(
    root: str,
    spec: VehicleSpec = VehicleSpec(),
    layout: str = "veri",
    overwrite: bool = False,
    verbose: bool = False,
    replace_own: bool = True,
) -> str:
    """Write the synthetic vehicles in the folder layout of VeRi (``<root>/veri``), VehicleID
    (``<root>/vehicleid``) or VERI-Wild (``<root>/VERI-Wild``); returns that folder. An existing
    folder is replaced only when this generator wrote it (marker, nothing added); ``overwrite``
    renames any other folder aside instead of refusing. The same ``spec`` draws the same
    vehicles and images in every layout."""
    if layout not in LAYOUTS:
        raise SyntheticSpecError(
            f"synthetic vehicles: unknown layout {layout!r}; choose one of {', '.join(LAYOUTS)}"
        )
    spec.validate()
    folder, writer, what = LAYOUTS[layout]
    return write_generated_tree(
        os.path.join(root, folder),
        lambda out: writer(out, spec),
        generator=__name__,
        what=what,
        info={**asdict(spec), "layout": layout},
        overwrite=overwrite,
        replace_own=replace_own,
        verbose=verbose,
    )


def generate_veri(
    root: str,
    spec: VehicleSpec = VehicleSpec(),
    overwrite: bool = False,
    verbose: bool = False,
    replace_own: bool = True,
) -> str:
    """:func:`generate_vehicles` in VeRi's layout."""
    return generate_vehicles(
        root, spec, "veri", overwrite=overwrite, verbose=verbose, replace_own=replace_own
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_root_argument(parser)
    d = VehicleSpec()
    add_size_arguments(parser, d, "vehicle")
    parser.add_argument("--small", action="store_true", help="a tiny set (14 vehicles) for tests")
    parser.add_argument(
        "--layout",
        choices=sorted(LAYOUTS),
        default="veri",
        help="folder layout: VeRi (default), VehicleID or VERI-Wild",
    )
    add_overwrite_arguments(parser)
    args = parser.parse_args(argv)
    if args.small:
        spec = VehicleSpec.small(seed=args.seed)
    else:
        spec = VehicleSpec(
            args.num_train_ids,
            args.num_test_ids,
            args.min_images,
            args.max_images,
            d.max_query_per_id,
            args.seed,
        )
    return run_tool(
        lambda: generate_vehicles(
            args.root,
            spec,
            args.layout,
            overwrite=args.overwrite,
            verbose=True,
            replace_own=not args.no_overwrite,
        ),
        logger_name=__name__,
    )


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sys.exit(main())
