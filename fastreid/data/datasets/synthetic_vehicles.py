"""A synthetic VeRi-776: procedurally drawn vehicles seen by twenty road cameras.

``python -m fastreid.data.datasets.synthetic_vehicles --root datasets`` writes
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

The folder follows the generators' rule (see :mod:`~fastreid.data.datasets.generated_tree`): it
carries a marker listing every file written, only such a folder is replaced, and anything else is a
refusal naming the folder (``--overwrite`` renames it aside; nothing is deleted).
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import sys
import time
from dataclasses import asdict, dataclass

import numpy as np
from PIL import Image, ImageFilter

from fastreid.utils.errors import run_tool

from .generated_tree import generated_tree
from .synthetic import SyntheticSpecError, _hsv, _palette, _rng, add_overwrite_arguments, plan_identities

__all__ = ["VehicleSpec", "LAYOUTS", "generate_vehicles", "generate_veri", "main"]

S = 64  # images are S x S
NUM_CAMS = 20
FOLDER = "veri"
SPLITS = {"image_train": "name_train.txt", "image_query": "name_query.txt", "image_test": "name_test.txt"}
JPEG_QUALITY = 90

_YY, _XX = np.mgrid[0:S, 0:S].astype(np.float32)

# body types: (length, height, roof start, roof end, roof height) as fractions of the box
_TYPES = (
    (0.80, 0.34, 0.28, 0.72, 0.40),  # sedan
    (0.80, 0.44, 0.22, 0.82, 0.48),  # SUV
    (0.84, 0.52, 0.10, 0.92, 0.55),  # van
    (0.94, 0.62, 0.04, 0.98, 0.62),  # bus
    (0.92, 0.56, 0.04, 0.34, 0.56),  # truck (cab in front, cargo box behind)
)


@dataclass(frozen=True)
class VehicleSpec:
    """Sizes of the generated set. ``small()`` is for tests (well under a second)."""

    num_train_ids: int = 60
    num_test_ids: int = 40
    min_images: int = 6
    max_images: int = 14
    max_query_per_id: int = 2
    seed: int = 0

    @classmethod
    def small(cls, seed: int = 0) -> VehicleSpec:
        return cls(num_train_ids=8, num_test_ids=6, min_images=4, max_images=6, max_query_per_id=1, seed=seed)

    def validate(self) -> None:
        if self.num_train_ids < 1 or self.num_test_ids < 1:
            raise SyntheticSpecError("synthetic vehicles: need at least one training and one test vehicle")
        if self.num_train_ids + self.num_test_ids > 776:
            raise SyntheticSpecError("synthetic vehicles: VeRi ids go up to 776, so at most 776 vehicles")
        if not 2 <= self.min_images <= self.max_images:
            raise SyntheticSpecError("synthetic vehicles: need 2 <= min_images <= max_images "
                                     "(a vehicle is seen by >= 2 cameras)")


@dataclass
class _Vehicle:
    body: np.ndarray
    glass: np.ndarray
    kind: int
    cargo: np.ndarray  # truck box colour
    stripe: np.ndarray | None
    rack: bool
    sticker: np.ndarray | None
    wheel: np.ndarray
    size: float


@dataclass
class _RoadCamera:
    road: np.ndarray
    verge: np.ndarray
    horizon: float
    lane_colour: np.ndarray
    gain: np.ndarray
    offset: float
    scale: float
    blur: float
    noise: float
    views: np.ndarray  # probabilities of front, rear, side


def _make_vehicle(seed: int, vid: int, palette: np.ndarray) -> _Vehicle:
    r = _rng(seed, 12, vid)

    def colour() -> np.ndarray:
        return np.clip(palette[r.integers(len(palette))] + r.normal(0, 0.04, 3), 0, 1).astype(np.float32)

    return _Vehicle(
        body=colour(),
        glass=_hsv(r.uniform(0.5, 0.7), r.uniform(0.1, 0.4), r.uniform(0.08, 0.35)),
        kind=int(r.choice(len(_TYPES), p=[0.4, 0.25, 0.15, 0.08, 0.12])),
        cargo=colour(),
        stripe=colour() if r.random() < 0.3 else None,
        rack=bool(r.random() < 0.25),
        sticker=colour() if r.random() < 0.35 else None,
        wheel=_hsv(0, 0, r.uniform(0.3, 0.8)),
        size=r.uniform(0.9, 1.05),
    )


def _make_camera(seed: int, cam: int) -> _RoadCamera:
    r = _rng(seed, 11, cam)
    return _RoadCamera(
        road=_hsv(r.random(), r.uniform(0.0, 0.15), r.uniform(0.25, 0.6)),
        verge=_hsv(r.random(), r.uniform(0.2, 0.6), r.uniform(0.3, 0.7)),
        horizon=r.uniform(0.1, 0.35) * S,
        lane_colour=_hsv(r.uniform(0.1, 0.17), r.uniform(0, 0.8), r.uniform(0.7, 0.95)),
        gain=r.uniform(0.8, 1.2, size=3).astype(np.float32),
        offset=r.uniform(-0.05, 0.05),
        scale=r.uniform(0.7, 0.92),
        blur=float(r.choice([0.0, 0.0, 0.4, 0.8])),
        noise=r.uniform(0.0, 0.04),
        views=r.dirichlet([1.0, 1.0, 1.2]),
    )


def _box(x0: float, y0: float, x1: float, y1: float) -> np.ndarray:
    return (_XX >= x0) & (_XX < x1) & (_YY >= y0) & (_YY < y1)


def _render(v: _Vehicle, cam: _RoadCamera, r: np.random.Generator) -> bytes:
    img = np.empty((S, S, 3), np.float32)
    img[:] = cam.road
    img[_YY < cam.horizon] = cam.verge
    lane_x = r.uniform(0, S)
    img[(np.abs(_XX - lane_x - (_YY - S / 2) * 0.3) < 1.2) & (_YY >= cam.horizon)] = cam.lane_colour

    length, height, roof0, roof1, roof_h = _TYPES[v.kind]
    view = int(r.choice(3, p=cam.views))  # 0 front, 1 rear, 2 side
    scale = cam.scale * v.size * r.uniform(0.93, 1.07)
    w = S * scale * (length if view == 2 else 0.62)
    h = S * scale * height
    cx, bottom = S / 2 + r.uniform(-4, 4), S * 0.8 + r.uniform(-3, 3)
    x0, x1, top = cx - w / 2, cx + w / 2, bottom - h
    mid = bottom - h * 0.45  # where the glass house starts

    img[_box(x0, mid, x1, bottom - h * 0.08)] = v.body  # lower body
    if view == 2:
        rx0, rx1 = x0 + w * roof0, x0 + w * roof1
        if v.kind == 4:  # truck: cab and cargo box
            img[_box(rx0, top, rx1, mid)] = v.body
            img[_box(rx0 + 1, top + 2, rx1 - 1, mid - 1)] = v.glass
            img[_box(rx1 + 1, top - h * 0.05, x1, mid + 1)] = v.cargo
        else:
            img[_box(rx0, top + h * (1 - roof_h) * 0.3, rx1, mid)] = v.body
            img[_box(rx0 + 2, top + h * (1 - roof_h) * 0.3 + 2, rx1 - 2, mid - 1)] = v.glass
        for wx in (x0 + w * 0.2, x1 - w * 0.2):
            ring = ((_XX - wx) ** 2 + (_YY - (bottom - h * 0.08)) ** 2)
            img[ring <= (h * 0.2) ** 2] = (0.05, 0.05, 0.05)
            img[ring <= (h * 0.09) ** 2] = v.wheel
        if v.stripe is not None:
            img[_box(x0, mid + h * 0.12, x1, mid + h * 0.2)] = v.stripe
    else:
        img[_box(x0 + w * 0.06, top, x1 - w * 0.06, mid)] = v.body
        img[_box(x0 + w * 0.12, top + h * 0.08, x1 - w * 0.12, mid - 1)] = v.glass
        lamp = np.array((0.95, 0.95, 0.8) if view == 0 else (0.8, 0.1, 0.1), np.float32)
        for lx in (x0 + w * 0.05, x1 - w * 0.2):
            img[_box(lx, mid + h * 0.08, lx + w * 0.15, mid + h * 0.2)] = lamp
        if view == 0:  # grille and plate
            img[_box(cx - w * 0.18, mid + h * 0.1, cx + w * 0.18, mid + h * 0.22)] = v.body * 0.5
        img[_box(cx - w * 0.12, bottom - h * 0.22, cx + w * 0.12, bottom - h * 0.12)] = (0.9, 0.9, 0.2)
        if v.sticker is not None and view == 0:
            img[_box(x1 - w * 0.3, top + h * 0.1, x1 - w * 0.18, top + h * 0.2)] = v.sticker
        if v.kind == 4 and view == 1:
            img[_box(x0, top - h * 0.05, x1, mid + h * 0.3)] = v.cargo
    if v.rack:
        img[_box(x0 + w * 0.25, top - 2, x1 - w * 0.25, top)] = (0.15, 0.15, 0.15)

    if r.random() < 0.5:
        img = img[:, ::-1].copy()
    if r.random() < 0.2:  # a pole or another car's corner in front
        ox = r.uniform(0, S - 8)
        img[_box(ox, r.uniform(0, S / 2), ox + r.uniform(3, 10), S)] = _hsv(r.random(), r.uniform(0, 0.6), r.uniform(0.2, 0.8))

    img = np.clip(img * cam.gain * r.uniform(0.9, 1.1) + cam.offset, 0, 1)
    if cam.noise > 0:
        img = img + r.normal(0, cam.noise, img.shape).astype(np.float32)
    pil = Image.fromarray((np.clip(img, 0, 1) * 255 + 0.5).astype(np.uint8))
    if cam.blur + r.uniform(0, 0.3) > 0.3:
        pil = pil.filter(ImageFilter.GaussianBlur(cam.blur))
    buf = io.BytesIO()
    pil.save(buf, format="JPEG", quality=JPEG_QUALITY)
    return buf.getvalue()


def _plan(spec: VehicleSpec) -> list[tuple[str, int, int, int]]:
    """Every image to draw: (split folder, vehicle id 1..776, camera 1..20, image number)."""
    return plan_identities(spec, _rng(spec.seed, 10), (1, 777), NUM_CAMS, ("image_train", "image_query", "image_test"))


def _rendered(spec: VehicleSpec):
    """``(split, vehicle id, camera, image number, random generator, JPEG bytes)`` of every image."""
    palette = _palette(_rng(spec.seed, 13), n=16)
    cams = {c: _make_camera(spec.seed, c) for c in range(1, NUM_CAMS + 1)}
    vehicles: dict[int, _Vehicle] = {}
    for split, vid, cam, k in _plan(spec):
        vehicle = vehicles.get(vid) or vehicles.setdefault(vid, _make_vehicle(spec.seed, vid, palette))
        r = _rng(spec.seed, 14, vid, cam, k)
        yield split, vid, cam, k, r, _render(vehicle, cams[cam], r)


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
    return {size: set(test_vids[: max(1, round(n * (i + 1) / 3)) if i < 2 else n]) for i, size in enumerate(sizes)}


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
        _write(os.path.join(split_dir, f"test_list_{size}.txt"), _lines(f"{i} {v}" for i, v in test if v in vids))
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
        _write(os.path.join(split_dir, f"test_{size}_query.txt"), _lines(key for key, v in query if v in vids))
        _write(os.path.join(split_dir, f"test_{size}.txt"), _lines(key for key, v in gallery if v in vids))
    return len(info) - 1


#: layout -> (folder under the root, writer, what the marker calls it)
LAYOUTS = {
    "veri": (FOLDER, _write_veri, "synthetic VeRi"),
    "vehicleid": ("vehicleid", _write_vehicleid, "synthetic VehicleID"),
    "veriwild": ("VERI-Wild", _write_veriwild, "synthetic VERI-Wild"),
}


def generate_vehicles(root: str, spec: VehicleSpec = VehicleSpec(), layout: str = "veri", overwrite: bool = False,
                      verbose: bool = False, replace_own: bool = True) -> str:
    """Write the synthetic vehicles in the folder layout of VeRi (``<root>/veri``), VehicleID
    (``<root>/vehicleid``) or VERI-Wild (``<root>/VERI-Wild``); returns that folder. An existing
    folder is replaced only when this generator wrote it (marker, nothing added); ``overwrite``
    renames any other folder aside instead of refusing. The same ``spec`` draws the same
    vehicles and images in every layout."""
    if layout not in LAYOUTS:
        raise SyntheticSpecError(f"synthetic vehicles: unknown layout {layout!r}; choose one of {', '.join(LAYOUTS)}")
    spec.validate()
    folder, writer, what = LAYOUTS[layout]
    out = os.path.join(root, folder)
    start = time.perf_counter()
    with generated_tree(out, generator=__name__, what=what, info={**asdict(spec), "layout": layout},
                        overwrite=overwrite, replace_own=replace_own) as tree:
        count = writer(tree.path, spec)
    if verbose:
        if tree.moved_aside:
            print(f"moved the existing {out} aside to {tree.moved_aside}")
        print(f"wrote {count} images to {out} in {time.perf_counter() - start:.1f} s")
    return out


def generate_veri(root: str, spec: VehicleSpec = VehicleSpec(), overwrite: bool = False, verbose: bool = False,
                  replace_own: bool = True) -> str:
    """:func:`generate_vehicles` in VeRi's layout."""
    return generate_vehicles(root, spec, "veri", overwrite=overwrite, verbose=verbose, replace_own=replace_own)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=os.environ.get("FASTREID_DATASETS", "datasets"),
                        help="datasets folder (default: $FASTREID_DATASETS or 'datasets')")
    d = VehicleSpec()
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--num-train-ids", type=int, default=d.num_train_ids)
    parser.add_argument("--num-test-ids", type=int, default=d.num_test_ids)
    parser.add_argument("--min-images", type=int, default=d.min_images, help="images per vehicle, at least")
    parser.add_argument("--max-images", type=int, default=d.max_images, help="images per vehicle, at most")
    parser.add_argument("--small", action="store_true", help="a tiny set (14 vehicles) for tests")
    parser.add_argument("--layout", choices=sorted(LAYOUTS), default="veri",
                        help="folder layout: VeRi (default), VehicleID or VERI-Wild")
    add_overwrite_arguments(parser)
    args = parser.parse_args(argv)
    if args.small:
        spec = VehicleSpec.small(seed=args.seed)
    else:
        spec = VehicleSpec(args.num_train_ids, args.num_test_ids, args.min_images, args.max_images,
                           d.max_query_per_id, args.seed)
    return run_tool(lambda: generate_vehicles(args.root, spec, args.layout, overwrite=args.overwrite, verbose=True,
                                              replace_own=not args.no_overwrite), logger_name=__name__)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sys.exit(main())
