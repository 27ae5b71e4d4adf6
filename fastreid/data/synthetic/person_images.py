"""Drawing the synthetic persons: six cameras' scenes, identities (clothes, body, hair,
accessories), a pose and viewpoint per image, occluders, and each camera's colour cast, noise
and blur. Used by :mod:`~fastreid.data.synthetic.persons`, which plans and writes the images,
and by :mod:`~fastreid.data.synthetic.attributes`, which also sets the optional parts of an
:class:`Identity` (glasses, hand bag, held object, lower-body pattern, long coat, boots) and
labels each image with what is drawn (:func:`render_with_view` tells the viewpoint).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .common import add_noise, hsv, jpeg_bytes, rng

__all__ = [
    "H",
    "W",
    "Camera",
    "Identity",
    "make_camera",
    "make_camera_b",
    "make_identity",
    "render",
    "render_with_view",
]

#: The viewpoints :func:`render_with_view` reports.
FRONT, BACK, SIDE = 0, 1, 2

H, W = 128, 64

_YY, _XX = np.mgrid[0:H, 0:W].astype(np.float32)


@dataclass
class Camera:
    """What one camera gives every image it takes: scene, colour cast, scale, blur, noise, viewpoints."""

    bg_top: np.ndarray
    bg_bottom: np.ndarray
    floor: np.ndarray
    floor_y: float
    texture_freq: float
    texture_amp: float
    texture_dir: int
    gain: np.ndarray
    offset: float
    gamma: float
    scale: float
    blur: float
    noise: float
    views: np.ndarray  # probabilities of front, back, side
    scene_seed: int


def make_camera(seed: int, cam: int) -> Camera:
    r = rng(seed, 1, cam)
    return Camera(
        bg_top=hsv(r.random(), r.uniform(0.1, 0.6), r.uniform(0.35, 0.9)),
        bg_bottom=hsv(r.random(), r.uniform(0.1, 0.6), r.uniform(0.25, 0.8)),
        floor=hsv(r.random(), r.uniform(0.0, 0.4), r.uniform(0.2, 0.7)),
        floor_y=r.uniform(0.7, 0.9) * H,
        texture_freq=r.uniform(0.1, 0.6),
        texture_amp=r.uniform(0.03, 0.1),
        texture_dir=int(r.integers(0, 3)),
        gain=r.uniform(0.82, 1.18, size=3).astype(np.float32),
        offset=r.uniform(-0.05, 0.05),
        gamma=r.uniform(0.85, 1.2),
        scale=r.uniform(0.8, 0.96),
        blur=float(r.choice([0.0, 0.0, 0.5, 0.9, 1.3])),
        noise=r.uniform(0.0, 0.04),
        views=r.dirichlet([1.2, 1.2, 0.8]),
        scene_seed=int(r.integers(2**31)),
    )


def make_camera_b(seed: int, cam: int) -> Camera:
    """A camera of the second visual domain (:mod:`~fastreid.data.synthetic.persons`, domain B):
    indoor scenes (warm walls, a bright tiled floor, busy wall panels) under warm artificial light
    (red up, blue down, darker mid-tones), people further away, noisier and blurrier images, more
    side views. Its own random stream: no camera of domain A looks like one of B."""
    r = rng(seed, 11, cam)
    return Camera(
        bg_top=hsv(r.uniform(0.03, 0.14), r.uniform(0.25, 0.55), r.uniform(0.3, 0.6)),
        bg_bottom=hsv(r.uniform(0.5, 0.7), r.uniform(0.1, 0.4), r.uniform(0.2, 0.45)),
        floor=hsv(r.random(), r.uniform(0.0, 0.15), r.uniform(0.55, 0.85)),
        floor_y=r.uniform(0.66, 0.82) * H,
        texture_freq=r.uniform(0.6, 1.3),
        texture_amp=r.uniform(0.06, 0.12),
        texture_dir=int(r.integers(0, 3)),
        gain=np.array([r.uniform(1.02, 1.16), r.uniform(0.95, 1.04), r.uniform(0.8, 0.92)], np.float32),
        offset=r.uniform(-0.06, 0.0),
        gamma=r.uniform(1.05, 1.3),
        scale=r.uniform(0.76, 0.9),
        blur=float(r.choice([0.3, 0.6, 0.9])),
        noise=r.uniform(0.02, 0.05),
        views=r.dirichlet([1.0, 1.0, 1.6]),
        scene_seed=int(r.integers(2**31)),
    )


@dataclass
class Identity:
    """What one person looks like in every image: clothes, body, hair, accessories."""

    top: np.ndarray
    top2: np.ndarray
    pattern: int  # 0 solid, 1 h-stripes, 2 v-stripes, 3 two-tone, 4 checks
    period: float
    bottom: np.ndarray
    bottom_type: int  # 0 trousers, 1 shorts, 2 skirt
    long_sleeves: bool
    shoes: np.ndarray
    skin: np.ndarray
    hair: np.ndarray
    long_hair: bool
    height: float
    shoulder: float
    hip: float
    leg_start: float
    head: float
    backpack: np.ndarray | None
    bag: np.ndarray | None
    bag_side: int
    hat: np.ndarray | None
    logo: np.ndarray | None
    # Drawn only when set (the attribute generator sets them; make_identity leaves them off, so
    # the synthetic Market-1501 is unchanged). None of them draws a random number.
    glasses: bool = False
    handbag: np.ndarray | None = None  # carried in the hand, on the side away from the shoulder bag
    held: np.ndarray | None = None  # an object held in front of the chest
    lower_pattern: int = 0  # 0 solid, 1 horizontal stripes, 2 checks (with lower2)
    lower2: np.ndarray | None = None
    long_coat: bool = False  # the top's colour down to the knees
    boots: bool = False  # shoes up to mid-shin


def make_identity(seed: int, pid: int, palette: np.ndarray) -> Identity:
    r = rng(seed, 2, pid)

    def colour() -> np.ndarray:
        base = palette[r.integers(len(palette))]
        return np.clip(base + r.normal(0, 0.05, 3), 0, 1).astype(np.float32)

    def maybe(p: float) -> np.ndarray | None:
        return colour() if r.random() < p else None

    skin_tone = r.uniform(0.35, 0.95)
    return Identity(
        top=colour(),
        top2=colour(),
        pattern=int(r.choice(5, p=[0.36, 0.18, 0.16, 0.15, 0.15])),
        period=r.uniform(3.0, 8.0),
        bottom=colour(),
        bottom_type=int(r.choice(3, p=[0.65, 0.2, 0.15])),
        long_sleeves=bool(r.random() < 0.6),
        shoes=colour(),
        skin=np.array([skin_tone, skin_tone * 0.78, skin_tone * 0.62], np.float32),
        hair=hsv(r.uniform(0.0, 0.12), r.uniform(0.2, 0.8), r.uniform(0.05, 0.6)),
        long_hair=bool(r.random() < 0.35),
        height=r.uniform(0.88, 1.04),
        shoulder=r.uniform(0.105, 0.16),
        hip=r.uniform(0.085, 0.13),
        leg_start=r.uniform(0.46, 0.54),
        head=r.uniform(0.85, 1.15),
        backpack=maybe(0.35),
        bag=maybe(0.25),
        bag_side=int(r.choice([-1, 1])),
        hat=maybe(0.2),
        logo=maybe(0.3),
    )


def _fill(img: np.ndarray, mask: np.ndarray, colour: np.ndarray) -> None:
    img[mask] = colour


def _limb(x0: float, y0: float, x1: float, y1: float, half: float) -> np.ndarray:
    """Mask of a straight limb from (x0, y0) to (x1, y1) (y1 > y0) of half-width ``half``."""
    t = (_YY - y0) / max(y1 - y0, 1e-3)
    xc = x0 + (x1 - x0) * t
    return (t >= 0) & (t <= 1) & (np.abs(_XX - xc) <= half)


def _ellipse(cx: float, cy: float, rx: float, ry: float) -> np.ndarray:
    return ((_XX - cx) / rx) ** 2 + ((_YY - cy) / ry) ** 2 <= 1.0


def _background(cam: Camera, r: np.random.Generator) -> np.ndarray:
    t = (_YY / H)[..., None]
    img = cam.bg_top * (1 - t) + cam.bg_bottom * t
    shift = r.uniform(0, 50)
    coord = (_XX, _YY, _XX + _YY)[cam.texture_dir] + shift
    img = img + (cam.texture_amp * np.sign(np.sin(coord * cam.texture_freq)))[..., None]
    floor_y = cam.floor_y + r.uniform(-4, 4)
    img = np.where((floor_y <= _YY)[..., None], cam.floor + 0.05 * np.sin(_XX * 0.7 + shift)[..., None], img)
    # a few scene objects (windows, poles) at camera-fixed places, moving a little per image
    rc = rng(cam.scene_seed, 3)
    for _ in range(int(rc.integers(1, 4))):
        x0, y0 = rc.uniform(-10, W), rc.uniform(0, H * 0.6)
        w, h = rc.uniform(4, 20), rc.uniform(10, 50)
        colour = np.clip(cam.bg_top * rc.uniform(0.4, 1.6), 0, 1)
        dx = r.uniform(-3, 3)
        img[(x0 + dx <= _XX) & (x0 + dx + w > _XX) & (y0 <= _YY) & (y0 + h > _YY)] = colour
    return img.astype(np.float32)


def _fill_lower(img: np.ndarray, mask: np.ndarray, ident: Identity, cx: float, leg_y: float) -> None:
    """Trousers, shorts or skirt in ``ident.bottom``, with ``lower2`` stripes or checks."""
    if ident.lower_pattern == 0 or ident.lower2 is None:
        _fill(img, mask, ident.bottom)
        return
    rows = np.floor((_YY - leg_y) / 4.0) % 2 == 1
    alt = rows if ident.lower_pattern == 1 else rows ^ (np.floor((_XX - cx) / 4.0) % 2 == 1)
    _fill(img, mask & ~alt, ident.bottom)
    _fill(img, mask & alt, ident.lower2)


def _draw_person(
    img: np.ndarray, ident: Identity, cam: Camera, r: np.random.Generator, crop_shift: float = 0.0
) -> int:
    """Draw ``ident`` on ``img``; returns the viewpoint drawn (FRONT, BACK or SIDE)."""
    hp = H * cam.scale * ident.height * r.uniform(0.95, 1.05)
    cx = W / 2 + r.uniform(-5, 5) + crop_shift
    foot = min(H - 1.0, H * 0.5 + hp / 2 + r.uniform(-3, 5)) if crop_shift == 0 else H * 0.5 + hp / 2
    top = foot - hp
    view = int(r.choice(3, p=cam.views))  # 0 front, 1 back, 2 side
    side = view == 2
    width = 0.6 if side else 1.0

    def y(f: float) -> float:
        return top + f * hp

    sh = ident.shoulder * hp * width
    hip = ident.hip * hp * width
    leg_y = y(ident.leg_start)
    stride = r.uniform(0.0, 0.16 if side else 0.07) * hp
    swing = r.uniform(-0.08, 0.08) * hp

    # legs (behind torso), trousers / shorts / skirt
    leg_half = 0.035 * hp * (1.1 if side else 1.0)
    legs = []
    for sgn in (-1, 1):
        x_top = cx + sgn * hip * 0.5
        x_bot = cx + sgn * (hip * 0.45 + stride * 0.5)
        legs.append(_limb(x_top, leg_y, x_bot, y(0.96), leg_half))
    knee = y(0.72)
    shoe_top = y(0.86) if ident.boots else y(0.945)
    for m in legs:
        if ident.bottom_type == 0:
            _fill_lower(img, m, ident, cx, leg_y)
        else:
            _fill_lower(img, m & (knee > _YY), ident, cx, leg_y)
            _fill(img, m & (knee <= _YY), ident.skin)
        _fill(img, m & (shoe_top <= _YY), ident.shoes)
    if ident.bottom_type == 2:
        skirt = _limb(cx, leg_y - 2, cx, knee, 1) | (
            (leg_y - 2 <= _YY) & (knee >= _YY) & (np.abs(_XX - cx) <= hip * 0.6 + (_YY - leg_y) * 0.35)
        )
        _fill_lower(img, skirt, ident, cx, leg_y)

    # backpack straps / bag behind the torso in side view
    torso_top, torso_bot = y(0.16), leg_y + 2
    if ident.bag is not None:
        bx = cx + ident.bag_side * (sh + 2)
        _fill(img, (np.abs(_XX - bx) <= 0.05 * hp) & (y(0.42) <= _YY) & (y(0.55) >= _YY), ident.bag)
        _fill(img, _limb(cx - ident.bag_side * sh * 0.6, torso_top, bx, y(0.43), 0.8), ident.bag * 0.7)

    # torso: a trapezoid from the shoulders to the hips
    t = (_YY - torso_top) / max(torso_bot - torso_top, 1)
    half = sh + (hip * 0.6 - sh) * t
    torso = (t >= 0) & (t <= 1) & (np.abs(_XX - cx) <= half)
    pattern = ident.pattern
    if pattern == 0:
        _fill(img, torso, ident.top)
    else:
        u, v = _XX - cx, _YY - torso_top
        if pattern == 1:
            alt = (np.floor(v / ident.period) % 2) == 1
        elif pattern == 2:
            alt = (np.floor(u / ident.period) % 2) == 1
        elif pattern == 3:
            alt = t > 0.5
        else:
            alt = ((np.floor(u / ident.period) + np.floor(v / ident.period)) % 2) == 1
        _fill(img, torso & ~alt, ident.top)
        _fill(img, torso & alt, ident.top2)
    if ident.long_coat:  # the coat goes on from the hips to the knees, widening a little
        coat = (leg_y <= _YY) & (y(0.75) >= _YY) & (np.abs(_XX - cx) <= hip * 0.75 + (_YY - leg_y) * 0.12)
        _fill(img, coat, ident.top)
    if ident.logo is not None and view == 0:
        _fill(img, (np.abs(_XX - cx) <= 0.04 * hp) & (y(0.24) <= _YY) & (y(0.3) >= _YY), ident.logo)
    if ident.backpack is not None:
        if view == 1:
            _fill(img, (np.abs(_XX - cx) <= sh * 0.75) & (y(0.2) <= _YY) & (y(0.42) >= _YY), ident.backpack)
        elif view == 2:
            bx = cx - ident.bag_side * (sh + 0.05 * hp)
            _fill(img, (np.abs(_XX - bx) <= 0.05 * hp) & (y(0.2) <= _YY) & (y(0.4) >= _YY), ident.backpack)
        else:
            for sgn in (-1, 1):
                _fill(
                    img,
                    _limb(cx + sgn * sh * 0.6, torso_top, cx + sgn * sh * 0.55, y(0.36), 0.9),
                    ident.backpack,
                )

    # arms
    arm_half = 0.028 * hp
    sleeve_end = y(0.45) if ident.long_sleeves else y(0.27)
    arm_xs = [cx] if side else [cx - sh - arm_half * 0.6, cx + sh + arm_half * 0.6]
    for i, ax in enumerate(arm_xs):
        sw = swing if i == 0 else -swing
        arm = _limb(ax, y(0.17), ax + sw, y(0.47), arm_half)
        _fill(img, arm & (sleeve_end > _YY), ident.top)
        _fill(img, arm & (sleeve_end <= _YY), ident.skin)
    if ident.handbag is not None:  # in the hand, away from the shoulder bag's side
        hx = cx if side else cx - ident.bag_side * (sh + arm_half)
        _fill(img, (np.abs(_XX - hx) <= 0.045 * hp) & (y(0.47) <= _YY) & (y(0.56) >= _YY), ident.handbag)
    if ident.held is not None and view != BACK:  # held in front of the chest (hidden from behind)
        hx = cx + (0.06 * hp if side else 0.0)
        _fill(img, (np.abs(_XX - hx) <= sh * 0.7) & (y(0.33) <= _YY) & (y(0.44) >= _YY), ident.held)

    # head, hair, hat
    hr = 0.06 * hp * ident.head
    hcx, hcy = cx + (r.uniform(-1, 1) if side else 0), y(0.08)
    _fill(img, _limb(cx, y(0.12), cx, y(0.17), hr * 0.45), ident.skin)
    head = _ellipse(hcx, hcy, hr * 0.8, hr)
    _fill(img, head, ident.skin)
    if view == 1:
        _fill(img, head, ident.hair)
    else:
        _fill(img, head & (hcy - hr * 0.35 > _YY), ident.hair)
    if ident.long_hair:
        _fill(
            img,
            _limb(hcx, hcy, hcx, y(0.25), hr * 0.85) & ~(head & (view != 1) & (hcy - hr * 0.35 <= _YY)),
            ident.hair,
        )
    if ident.glasses and view != BACK:  # a dark band at eye level
        eyes = (np.abs(_XX - hcx) <= hr * 0.75) & (np.abs(_YY - (hcy - hr * 0.05)) <= max(hr * 0.14, 0.6))
        _fill(img, eyes, np.array([0.05, 0.05, 0.07], np.float32))
    if ident.hat is not None:
        _fill(img, _ellipse(hcx, hcy - hr * 0.55, hr * 1.05, hr * 0.55), ident.hat)
    return view


def _occlude(img: np.ndarray, r: np.random.Generator) -> None:
    kind = int(r.integers(3))
    colour = hsv(r.random(), r.uniform(0, 0.7), r.uniform(0.1, 0.9))
    if kind == 0:  # something in front of the legs (a car, a bench)
        y0 = r.uniform(0.6, 0.85) * H
        _fill(img, y0 <= _YY, colour)
    elif kind == 1:  # a pole
        x0, w = r.uniform(0, W - 6), r.uniform(4, 10)
        _fill(img, (x0 <= _XX) & (x0 + w > _XX), colour)
    else:  # another pedestrian's shoulder on one side
        cx = r.choice([0.0, float(W)]) + r.uniform(-6, 6)
        _fill(img, _ellipse(cx, r.uniform(0.3, 0.7) * H, r.uniform(8, 16), r.uniform(25, 45)), colour)


def _finish(img: np.ndarray, cam: Camera, r: np.random.Generator) -> bytes:
    gain = cam.gain * r.uniform(0.92, 1.08)
    img = np.clip(img * gain + cam.offset + r.uniform(-0.04, 0.04), 0, 1) ** cam.gamma
    img = add_noise(img, cam.noise, r)
    blur = cam.blur + r.uniform(0, 0.3)
    return jpeg_bytes(img, blur if blur > 0.2 else None)


def render(ident: Identity | None, cam: Camera, r: np.random.Generator, kind: str = "person") -> bytes:
    """JPEG bytes of one image by ``cam``: ``kind`` "person" (``ident``), "distractor" (part of
    ``ident``, off-centre, as a badly placed detection box) or "junk" (background and clutter)."""
    return render_with_view(ident, cam, r, kind)[0]


def render_with_view(
    ident: Identity | None, cam: Camera, r: np.random.Generator, kind: str = "person"
) -> tuple[bytes, int | None]:
    """:func:`render`'s JPEG bytes (the same, for the same arguments) and the viewpoint the person
    was drawn from (FRONT, BACK or SIDE; None for junk). Mirroring the image keeps the viewpoint."""
    img = _background(cam, r)
    view = None
    if kind == "person":
        assert ident is not None  # only junk is drawn without an identity
        view = _draw_person(img, ident, cam, r)
        if r.random() < 0.5:
            img = img[:, ::-1].copy()
        if r.random() < 0.2:
            _occlude(img, r)
    elif kind == "distractor":  # a badly placed detection box: part of someone
        assert ident is not None
        view = _draw_person(img, ident, cam, r, crop_shift=float(r.choice([-1, 1])) * r.uniform(18, 30))
        if r.random() < 0.5:
            _occlude(img, r)
    else:  # junk: background and clutter
        for _ in range(2):
            _occlude(img, r)
    return _finish(img, cam, r), view
