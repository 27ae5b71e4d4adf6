"""A synthetic Market-1501: procedurally drawn persons seen by six cameras.

``python -m fastreid.data.datasets.synthetic --root datasets`` writes
``datasets/Market-1501-v15.09.15/{bounding_box_train,bounding_box_test,query}`` with Market's
file names (``PPPP_cCsS_FFFFFF_NN.jpg``, 128x64 JPEGs), distractors (pid 0000) and junk (pid -1)
in the gallery, so :class:`~fastreid.data.datasets.Market1501` reads it unchanged and demos need
no download.

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
import io
import logging
import os
import sys
import time
from dataclasses import asdict, dataclass

import numpy as np
from PIL import Image, ImageFilter

from fastreid.utils.errors import UserError, run_tool

from .generated_tree import GeneratedTreeError, generated_tree

__all__ = ["SyntheticSpec", "SyntheticSpecError", "GeneratedTreeError", "generate_market1501",
           "raw_pixel_baseline", "main"]

H, W = 128, 64
NUM_CAMS = 6
FOLDER = "Market-1501-v15.09.15"
SPLIT_DIRS = ("bounding_box_train", "bounding_box_test", "query")
JPEG_QUALITY = 90

_YY, _XX = np.mgrid[0:H, 0:W].astype(np.float32)


class SyntheticSpecError(UserError, ValueError):
    """Sizes the generator cannot honour."""

    exit_code = 2


@dataclass(frozen=True)
class SyntheticSpec:
    """Sizes of the generated set. ``small()`` is for tests (a second or less)."""

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
        return cls(num_train_ids=12, num_test_ids=8, min_images=4, max_images=6,
                   max_query_per_id=2, num_distractors=5, num_junk=3, seed=seed)

    def validate(self) -> None:
        if self.num_train_ids < 1 or self.num_test_ids < 1:
            raise SyntheticSpecError("synthetic: need at least one training and one test identity")
        if self.num_train_ids + self.num_test_ids > 1500:
            raise SyntheticSpecError("synthetic: Market-1501 names allow at most 1500 identities (pids 2..1501)")
        if not 2 <= self.min_images <= self.max_images:
            raise SyntheticSpecError("synthetic: need 2 <= min_images <= max_images (an id is seen by >= 2 cameras)")


def _rng(*parts: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(p) & 0xFFFFFFFF for p in parts]))


def _hsv(h: float, s: float, v: float) -> np.ndarray:
    """One HSV colour (components in 0..1) as RGB floats."""
    i = int(h * 6) % 6
    f = h * 6 - int(h * 6)
    p, q, t = v * (1 - s), v * (1 - s * f), v * (1 - s * (1 - f))
    rgb = [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)][i]
    return np.array(rgb, dtype=np.float32)


# A shared palette: identities draw clothing colours from it, so colour alone is ambiguous.
def _palette(rng: np.random.Generator, n: int = 24) -> np.ndarray:
    colours = [_hsv(rng.random(), rng.uniform(0.35, 0.95), rng.uniform(0.3, 0.95)) for _ in range(n - 4)]
    colours += [np.array(c, np.float32) for c in ((0.1, 0.1, 0.12), (0.9, 0.9, 0.88), (0.5, 0.5, 0.52),
                                                  (0.2, 0.22, 0.4))]
    return np.stack(colours)


@dataclass
class _Camera:
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


def _make_camera(seed: int, cam: int) -> _Camera:
    r = _rng(seed, 1, cam)
    return _Camera(
        bg_top=_hsv(r.random(), r.uniform(0.1, 0.6), r.uniform(0.35, 0.9)),
        bg_bottom=_hsv(r.random(), r.uniform(0.1, 0.6), r.uniform(0.25, 0.8)),
        floor=_hsv(r.random(), r.uniform(0.0, 0.4), r.uniform(0.2, 0.7)),
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


@dataclass
class _Identity:
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


def _make_identity(seed: int, pid: int, palette: np.ndarray) -> _Identity:
    r = _rng(seed, 2, pid)

    def colour() -> np.ndarray:
        base = palette[r.integers(len(palette))]
        return np.clip(base + r.normal(0, 0.05, 3), 0, 1).astype(np.float32)

    def maybe(p: float) -> np.ndarray | None:
        return colour() if r.random() < p else None

    skin_tone = r.uniform(0.35, 0.95)
    return _Identity(
        top=colour(), top2=colour(), pattern=int(r.choice(5, p=[0.36, 0.18, 0.16, 0.15, 0.15])),
        period=r.uniform(3.0, 8.0), bottom=colour(), bottom_type=int(r.choice(3, p=[0.65, 0.2, 0.15])),
        long_sleeves=bool(r.random() < 0.6), shoes=colour(),
        skin=np.array([skin_tone, skin_tone * 0.78, skin_tone * 0.62], np.float32),
        hair=_hsv(r.uniform(0.0, 0.12), r.uniform(0.2, 0.8), r.uniform(0.05, 0.6)),
        long_hair=bool(r.random() < 0.35), height=r.uniform(0.88, 1.04),
        shoulder=r.uniform(0.105, 0.16), hip=r.uniform(0.085, 0.13), leg_start=r.uniform(0.46, 0.54),
        head=r.uniform(0.85, 1.15), backpack=maybe(0.35), bag=maybe(0.25),
        bag_side=int(r.choice([-1, 1])), hat=maybe(0.2), logo=maybe(0.3),
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


def _background(cam: _Camera, r: np.random.Generator) -> np.ndarray:
    t = (_YY / H)[..., None]
    img = cam.bg_top * (1 - t) + cam.bg_bottom * t
    shift = r.uniform(0, 50)
    coord = (_XX, _YY, _XX + _YY)[cam.texture_dir] + shift
    img = img + (cam.texture_amp * np.sign(np.sin(coord * cam.texture_freq)))[..., None]
    floor_y = cam.floor_y + r.uniform(-4, 4)
    img = np.where((floor_y <= _YY)[..., None], cam.floor + 0.05 * np.sin(_XX * 0.7 + shift)[..., None], img)
    # a few scene objects (windows, poles) at camera-fixed places, moving a little per image
    rc = _rng(cam.scene_seed, 3)
    for _ in range(int(rc.integers(1, 4))):
        x0, y0 = rc.uniform(-10, W), rc.uniform(0, H * 0.6)
        w, h = rc.uniform(4, 20), rc.uniform(10, 50)
        colour = np.clip(cam.bg_top * rc.uniform(0.4, 1.6), 0, 1)
        dx = r.uniform(-3, 3)
        img[(x0 + dx <= _XX) & (x0 + dx + w > _XX) & (y0 <= _YY) & (y0 + h > _YY)] = colour
    return img.astype(np.float32)


def _draw_person(img: np.ndarray, ident: _Identity, cam: _Camera, r: np.random.Generator,
                 crop_shift: float = 0.0) -> None:
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
    for m in legs:
        if ident.bottom_type == 0:
            _fill(img, m, ident.bottom)
        else:
            _fill(img, m & (knee > _YY), ident.bottom)
            _fill(img, m & (knee <= _YY), ident.skin)
        _fill(img, m & (y(0.945) <= _YY), ident.shoes)
    if ident.bottom_type == 2:
        skirt = _limb(cx, leg_y - 2, cx, knee, 1) | (
            (leg_y - 2 <= _YY) & (knee >= _YY) & (np.abs(_XX - cx) <= hip * 0.6 + (_YY - leg_y) * 0.35))
        _fill(img, skirt, ident.bottom)

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
                _fill(img, _limb(cx + sgn * sh * 0.6, torso_top, cx + sgn * sh * 0.55, y(0.36), 0.9),
                      ident.backpack)

    # arms
    arm_half = 0.028 * hp
    sleeve_end = y(0.45) if ident.long_sleeves else y(0.27)
    arm_xs = [cx] if side else [cx - sh - arm_half * 0.6, cx + sh + arm_half * 0.6]
    for i, ax in enumerate(arm_xs):
        sw = swing if i == 0 else -swing
        arm = _limb(ax, y(0.17), ax + sw, y(0.47), arm_half)
        _fill(img, arm & (sleeve_end > _YY), ident.top)
        _fill(img, arm & (sleeve_end <= _YY), ident.skin)

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
        _fill(img, _limb(hcx, hcy, hcx, y(0.25), hr * 0.85) & ~(head & (view != 1) & (hcy - hr * 0.35 <= _YY)),
              ident.hair)
    if ident.hat is not None:
        _fill(img, _ellipse(hcx, hcy - hr * 0.55, hr * 1.05, hr * 0.55), ident.hat)


def _occlude(img: np.ndarray, r: np.random.Generator) -> None:
    kind = int(r.integers(3))
    colour = _hsv(r.random(), r.uniform(0, 0.7), r.uniform(0.1, 0.9))
    if kind == 0:  # something in front of the legs (a car, a bench)
        y0 = r.uniform(0.6, 0.85) * H
        _fill(img, y0 <= _YY, colour)
    elif kind == 1:  # a pole
        x0, w = r.uniform(0, W - 6), r.uniform(4, 10)
        _fill(img, (x0 <= _XX) & (x0 + w > _XX), colour)
    else:  # another pedestrian's shoulder on one side
        cx = r.choice([0.0, float(W)]) + r.uniform(-6, 6)
        _fill(img, _ellipse(cx, r.uniform(0.3, 0.7) * H, r.uniform(8, 16), r.uniform(25, 45)), colour)


def _finish(img: np.ndarray, cam: _Camera, r: np.random.Generator) -> bytes:
    gain = cam.gain * r.uniform(0.92, 1.08)
    img = np.clip(img * gain + cam.offset + r.uniform(-0.04, 0.04), 0, 1) ** cam.gamma
    if cam.noise > 0:
        img = img + r.normal(0, cam.noise, img.shape).astype(np.float32)
    pil = Image.fromarray((np.clip(img, 0, 1) * 255 + 0.5).astype(np.uint8))
    blur = cam.blur + r.uniform(0, 0.3)
    if blur > 0.2:
        pil = pil.filter(ImageFilter.GaussianBlur(blur))
    buf = io.BytesIO()
    pil.save(buf, format="JPEG", quality=JPEG_QUALITY)
    return buf.getvalue()


def _render(ident: _Identity | None, cam: _Camera, r: np.random.Generator, kind: str = "person") -> bytes:
    img = _background(cam, r)
    if kind == "person":
        assert ident is not None  # only junk is drawn without an identity
        _draw_person(img, ident, cam, r)
        if r.random() < 0.5:
            img = img[:, ::-1].copy()
        if r.random() < 0.2:
            _occlude(img, r)
    elif kind == "distractor":  # a badly placed detection box: part of someone
        assert ident is not None
        _draw_person(img, ident, cam, r, crop_shift=float(r.choice([-1, 1])) * r.uniform(18, 30))
        if r.random() < 0.5:
            _occlude(img, r)
    else:  # junk: background and clutter
        for _ in range(2):
            _occlude(img, r)
    return _finish(img, cam, r)


def plan_identities(spec, r: np.random.Generator, ids: tuple[int, int], num_cams: int,
                    splits: tuple[str, str, str]) -> list[tuple[str, int, int, int]]:
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


def _plan(spec: SyntheticSpec) -> list[tuple[str, int, int, int, str]]:
    """Every image to draw: (split dir, pid, camera 1..6, image number, kind)."""
    r = _rng(spec.seed, 0)
    plan = [(*item, "person") for item in
            plan_identities(spec, r, (2, 1502), NUM_CAMS, ("bounding_box_train", "query", "bounding_box_test"))]
    for i in range(spec.num_distractors):
        plan.append(("bounding_box_test", 0, int(r.integers(1, NUM_CAMS + 1)), i, "distractor"))
    for i in range(spec.num_junk):
        plan.append(("bounding_box_test", -1, int(r.integers(1, NUM_CAMS + 1)), i, "junk"))
    return plan


def _file_name(pid: int, cam: int, k: int, r: np.random.Generator) -> str:
    seq = int(r.integers(1, 7))
    frame = int(r.integers(0, 4000)) * 50 + k
    box = int(r.integers(1, 4))
    prefix = "-1" if pid == -1 else f"{pid:04d}"
    return f"{prefix}_c{cam}s{seq}_{frame:06d}_{box:02d}.jpg"


def generate_market1501(root: str, spec: SyntheticSpec = SyntheticSpec(), overwrite: bool = False,
                        verbose: bool = False, replace_own: bool = True) -> str:
    """Write the synthetic set to ``<root>/Market-1501-v15.09.15``; returns that folder.

    The folder gets a marker listing every file written (see
    :mod:`~fastreid.data.datasets.generated_tree`). An existing folder is replaced only when it
    carries that marker and nothing else was added to it; any other existing folder (a real
    Market-1501) raises :class:`GeneratedTreeError`, or with ``overwrite`` is renamed aside to
    ``<folder>.old-<time>``. Nothing the generator did not write is ever deleted.
    ``replace_own=False`` refuses to replace even a marked folder.
    """
    spec.validate()
    out = os.path.join(root, FOLDER)
    start = time.perf_counter()
    with generated_tree(out, generator=__name__, what="synthetic Market-1501", info=asdict(spec),
                        overwrite=overwrite, replace_own=replace_own) as tree:
        _write_market_images(tree.path, spec)
        with open(os.path.join(tree.path, "README.txt"), "w", encoding="utf-8") as f:
            f.write(f"Synthetic Market-1501 written by fastreid.data.datasets.synthetic ({spec}).\n")
    if verbose:
        if tree.moved_aside:
            print(f"moved the existing {out} aside to {tree.moved_aside}")
        print(f"wrote {len(_plan(spec))} images to {out} in {time.perf_counter() - start:.1f} s")
    return out


def _write_market_images(out: str, spec: SyntheticSpec) -> None:
    for d in SPLIT_DIRS:
        os.makedirs(os.path.join(out, d))
    palette = _palette(_rng(spec.seed, 4))
    cams = {c: _make_camera(spec.seed, c) for c in range(1, NUM_CAMS + 1)}
    idents: dict[int, _Identity] = {}
    for n, (split, pid, cam, k, kind) in enumerate(_plan(spec)):
        r = _rng(spec.seed, 5, pid + 2, cam, k, n if pid <= 0 else 0)
        ident = None
        if kind == "person":
            ident = idents.get(pid) or idents.setdefault(pid, _make_identity(spec.seed, pid, palette))
        elif kind == "distractor":
            ident = _make_identity(spec.seed, 100000 + k, palette)
        data = _render(ident, cams[cam], r, kind)
        name = _file_name(pid, cam, k, r)
        path = os.path.join(out, split, name)
        if os.path.exists(path):  # a rare name clash: add a box number that is free
            stem = name[:-7]
            path = next(p for b in range(4, 100)
                        if not os.path.exists(p := os.path.join(out, split, f"{stem}_{b:02d}.jpg")))
        with open(path, "wb") as f:
            f.write(data)


def _load_split(folder: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    from .market_format import parse_market_folder

    items = parse_market_folder(folder, num_cams=NUM_CAMS)
    feats = np.stack([np.asarray(Image.open(p).convert("RGB"), np.float32).ravel() for p, _, _ in items])
    feats -= feats.mean(axis=1, keepdims=True)
    feats /= np.linalg.norm(feats, axis=1, keepdims=True) + 1e-6
    return feats, np.array([i[1] for i in items]), np.array([i[2] for i in items])


def raw_pixel_baseline(data_dir: str) -> dict[str, float]:
    """Rank-1 and mAP (%) of matching query to gallery by the cosine of raw pixels.

    Market's protocol: gallery images of the query's identity from the query's camera are
    ignored, junk (-1) is not in the lists, distractors (0) count as wrong matches.
    """
    qf, qp, qc = _load_split(os.path.join(data_dir, "query"))
    gf, gp, gc = _load_split(os.path.join(data_dir, "bounding_box_test"))
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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=os.environ.get("FASTREID_DATASETS", "datasets"),
                        help="datasets folder (default: $FASTREID_DATASETS or 'datasets')")
    d = SyntheticSpec()
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--num-ids", type=int, default=None,
                        help="total identities, split 60/40 into train/test (overrides the two below)")
    parser.add_argument("--num-train-ids", type=int, default=d.num_train_ids)
    parser.add_argument("--num-test-ids", type=int, default=d.num_test_ids)
    parser.add_argument("--min-images", type=int, default=d.min_images, help="images per identity, at least")
    parser.add_argument("--max-images", type=int, default=d.max_images, help="images per identity, at most")
    parser.add_argument("--num-distractors", type=int, default=d.num_distractors)
    parser.add_argument("--num-junk", type=int, default=d.num_junk)
    parser.add_argument("--small", action="store_true", help="a tiny set (20 identities) for tests")
    add_overwrite_arguments(parser)
    parser.add_argument("--raw-pixel-baseline", action="store_true",
                        help="after writing, print Rank-1/mAP of raw-pixel matching")
    args = parser.parse_args(argv)
    if args.small:
        spec = SyntheticSpec.small(seed=args.seed)
    else:
        n_train, n_test = args.num_train_ids, args.num_test_ids
        if args.num_ids is not None:
            n_train = max(1, round(args.num_ids * 0.6))
            n_test = max(1, args.num_ids - n_train)
        spec = SyntheticSpec(n_train, n_test, args.min_images, args.max_images, d.max_query_per_id,
                             args.num_distractors, args.num_junk, args.seed)

    def run() -> None:
        out = generate_market1501(args.root, spec, overwrite=args.overwrite, verbose=True,
                                  replace_own=not args.no_overwrite)
        if args.raw_pixel_baseline:
            res = raw_pixel_baseline(out)
            print(f"raw-pixel matching: Rank-1 {res['Rank-1']:.1f}%  mAP {res['mAP']:.1f}%  "
                  f"({res['queries']} queries)")

    return run_tool(run, logger_name=__name__)


def add_overwrite_arguments(parser: argparse.ArgumentParser) -> None:
    """``--overwrite`` / ``--no-overwrite``, the same for every generator."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--overwrite", action="store_true",
                       help="if the output folder holds data this generator did not write, move it aside "
                            "to <folder>.old-<time> (nothing is deleted) instead of refusing")
    group.add_argument("--no-overwrite", action="store_true",
                       help="refuse even when the folder is one this generator wrote earlier")


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sys.exit(main())
