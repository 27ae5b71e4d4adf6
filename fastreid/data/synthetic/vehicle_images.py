"""Drawing the synthetic vehicles: body types and details, twenty road cameras, a viewpoint per
image, occluders, and each camera's colour cast, noise and blur. Used by
:mod:`~fastreid.data.synthetic.vehicles`, which plans and writes the images.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .common import add_noise, hsv, jpeg_bytes, rng

__all__ = ["S", "Vehicle", "RoadCamera", "make_vehicle", "make_camera", "render"]

S = 64  # images are S x S

_YY, _XX = np.mgrid[0:S, 0:S].astype(np.float32)

# body types: (length, height, roof start, roof end, roof height) as fractions of the box
_TYPES = (
    (0.80, 0.34, 0.28, 0.72, 0.40),  # sedan
    (0.80, 0.44, 0.22, 0.82, 0.48),  # SUV
    (0.84, 0.52, 0.10, 0.92, 0.55),  # van
    (0.94, 0.62, 0.04, 0.98, 0.62),  # bus
    (0.92, 0.56, 0.04, 0.34, 0.56),  # truck (cab in front, cargo box behind)
)


@dataclass
class Vehicle:
    """What one vehicle looks like in every image: body type, colours, details."""

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
class RoadCamera:
    """What one road camera gives every image it takes: road, verge, colour cast, scale, blur, noise,
    viewpoints."""

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


def make_vehicle(seed: int, vid: int, palette: np.ndarray) -> Vehicle:
    r = rng(seed, 12, vid)

    def colour() -> np.ndarray:
        return np.clip(palette[r.integers(len(palette))] + r.normal(0, 0.04, 3), 0, 1).astype(np.float32)

    return Vehicle(
        body=colour(),
        glass=hsv(r.uniform(0.5, 0.7), r.uniform(0.1, 0.4), r.uniform(0.08, 0.35)),
        kind=int(r.choice(len(_TYPES), p=[0.4, 0.25, 0.15, 0.08, 0.12])),
        cargo=colour(),
        stripe=colour() if r.random() < 0.3 else None,
        rack=bool(r.random() < 0.25),
        sticker=colour() if r.random() < 0.35 else None,
        wheel=hsv(0, 0, r.uniform(0.3, 0.8)),
        size=r.uniform(0.9, 1.05),
    )


def make_camera(seed: int, cam: int) -> RoadCamera:
    r = rng(seed, 11, cam)
    return RoadCamera(
        road=hsv(r.random(), r.uniform(0.0, 0.15), r.uniform(0.25, 0.6)),
        verge=hsv(r.random(), r.uniform(0.2, 0.6), r.uniform(0.3, 0.7)),
        horizon=r.uniform(0.1, 0.35) * S,
        lane_colour=hsv(r.uniform(0.1, 0.17), r.uniform(0, 0.8), r.uniform(0.7, 0.95)),
        gain=r.uniform(0.8, 1.2, size=3).astype(np.float32),
        offset=r.uniform(-0.05, 0.05),
        scale=r.uniform(0.7, 0.92),
        blur=float(r.choice([0.0, 0.0, 0.4, 0.8])),
        noise=r.uniform(0.0, 0.04),
        views=r.dirichlet([1.0, 1.0, 1.2]),
    )


def _box(x0: float, y0: float, x1: float, y1: float) -> np.ndarray:
    return (x0 <= _XX) & (x1 > _XX) & (y0 <= _YY) & (y1 > _YY)


def render(v: Vehicle, cam: RoadCamera, r: np.random.Generator) -> bytes:
    """JPEG bytes of one image of ``v`` by ``cam``."""
    img = np.empty((S, S, 3), np.float32)
    img[:] = cam.road
    img[cam.horizon > _YY] = cam.verge
    lane_x = r.uniform(0, S)
    img[(np.abs(_XX - lane_x - (_YY - S / 2) * 0.3) < 1.2) & (cam.horizon <= _YY)] = cam.lane_colour

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
            ring = (_XX - wx) ** 2 + (_YY - (bottom - h * 0.08)) ** 2
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
        img[_box(ox, r.uniform(0, S / 2), ox + r.uniform(3, 10), S)] = hsv(
            r.random(), r.uniform(0, 0.6), r.uniform(0.2, 0.8)
        )

    img = np.clip(img * cam.gain * r.uniform(0.9, 1.1) + cam.offset, 0, 1)
    img = add_noise(img, cam.noise, r)
    return jpeg_bytes(img, cam.blur if cam.blur + r.uniform(0, 0.3) > 0.3 else None)
