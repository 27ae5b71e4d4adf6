"""Synthetic faces in the layouts of the face family (``fastreid.projects.face``): an MS1MV2-like
training set and LFW / CFP-FP / AgeDB-30-like verification pairs.

``python -m fastreid.data.synthetic.faces --root datasets`` writes::

    datasets/MS_Celeb_1M/<identity>/<n>.jpg      training identities (upstream's MS1MV2 layout)
    datasets/faces_emore_val/lfw/pairs.txt       '<left> <right> <1|0>' per line, the images
    datasets/faces_emore_val/lfw/<identity>/<n>.jpg    beside it; the same for cfp_fp, agedb_30

so that ``MS1MV2`` and ``LFW`` / ``CFP_FP`` / ``AgeDB_30`` read them unchanged and
``configs/Face/*.yml`` train and evaluate with no download (docs/face.md).

A face is drawn from its identity (skin tone, face shape, eye spacing / size / colour, brows,
nose, mouth, hair colour and style, glasses, beard) and per image a pose (a turn of the head that
moves the features sideways and narrows the far side, a tilt), scale, shift, lighting, background
and sensor noise; a fifth of the training photos show the person older. The test sets' identities
are not training identities; CFP-FP pairs a frontal image with a strongly turned one, AgeDB-30
greys the hair and lines the face of one side. Square JPEGs of ``--size`` pixels (112,
InsightFace's aligned size, by default). Half of each set's pairs show one person. Output is a
pure function of the arguments.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import asdict, dataclass

import numpy as np
from PIL import Image, ImageDraw

from .common import (
    SyntheticSpecError,
    hsv,
    jpeg_bytes,
    rng,
    spec_command,
    write_generated_tree,
)

__all__ = [
    "FaceSpec",
    "FaceIdentity",
    "TEST_SETS",
    "TRAIN_FOLDER",
    "TEST_FOLDER",
    "generate_faces",
    "render_face",
    "main",
]

TRAIN_FOLDER = "MS_Celeb_1M"
TEST_FOLDER = "faces_emore_val"
#: The verification sets written, with how their second image differs.
TEST_SETS = ("lfw", "cfp_fp", "agedb_30")


@dataclass(frozen=True)
class FaceSpec:
    """Sizes of the synthetic face sets."""

    num_train_ids: int = 100
    images_per_id: int = 6
    num_test_ids: int = 60
    pairs_per_set: int = 200
    size: int = 112
    seed: int = 0

    @classmethod
    def small(cls, seed: int = 0) -> FaceSpec:
        """A tiny set for tests: 12 training identities of 4 images, 40 pairs per test set, 48 pixels."""
        return cls(num_train_ids=12, images_per_id=4, num_test_ids=12, pairs_per_set=40, size=48, seed=seed)

    def validate(self) -> None:
        if self.num_train_ids < 2 or self.images_per_id < 2:
            raise SyntheticSpecError(
                "synthetic faces: need at least 2 training identities of at least 2 images"
            )
        if self.num_test_ids < 2:
            raise SyntheticSpecError(
                "synthetic faces: need at least 2 test identities (pairs of different persons)"
            )
        if self.pairs_per_set < 10 or self.pairs_per_set % 2:
            raise SyntheticSpecError(
                "synthetic faces: pairs_per_set must be even and at least 10 (10-fold verification)"
            )
        if not 16 <= self.size <= 512:
            raise SyntheticSpecError("synthetic faces: size must be 16..512 pixels")


@dataclass(frozen=True)
class FaceIdentity:
    """What stays the same across a person's images (colours as RGB 0..1, lengths as fractions of
    the image side)."""

    skin: tuple
    hair: tuple
    eyes: tuple
    lips: tuple
    face_w: float
    face_h: float
    eye_dx: float
    eye_y: float
    eye_r: float
    brow: float  # brow thickness, 0: none
    nose: float
    mouth_w: float
    mouth_y: float
    hair_style: int  # 0 short, 1 long, 2 bald, 3 fringe
    glasses: bool
    beard: bool


def make_identity(seed: int, pid: int) -> FaceIdentity:
    r = rng(seed, 11, pid)

    def colour(h: float, s: float, v: float) -> tuple:
        return tuple(float(c) for c in hsv(h % 1.0, s, v))

    return FaceIdentity(
        skin=colour(r.uniform(0.02, 0.11), r.uniform(0.25, 0.7), r.uniform(0.35, 0.95)),
        hair=colour(r.random(), r.uniform(0.1, 0.9), r.uniform(0.05, 0.9)),
        eyes=colour(r.random(), r.uniform(0.4, 1.0), r.uniform(0.2, 0.8)),
        lips=colour(r.uniform(-0.05, 0.05), r.uniform(0.4, 0.9), r.uniform(0.35, 0.85)),
        face_w=float(r.uniform(0.26, 0.36)),
        face_h=float(r.uniform(0.34, 0.44)),
        eye_dx=float(r.uniform(0.09, 0.16)),
        eye_y=float(r.uniform(-0.1, 0.0)),
        eye_r=float(r.uniform(0.025, 0.05)),
        brow=float(r.choice([0.0, 0.012, 0.025])),
        nose=float(r.uniform(0.05, 0.13)),
        mouth_w=float(r.uniform(0.07, 0.16)),
        mouth_y=float(r.uniform(0.15, 0.24)),
        hair_style=int(r.integers(0, 4)),
        glasses=bool(r.random() < 0.3),
        beard=bool(r.random() < 0.25),
    )


def _rgb(c: tuple) -> tuple:
    return tuple(int(255 * min(max(x, 0.0), 1.0) + 0.5) for x in c)


def render_face(
    ident: FaceIdentity, r: np.random.Generator, size: int, *, turn: float | None = None, aged: bool = False
) -> bytes:
    """One JPEG of ``ident``: ``turn`` (-1..1, 0 frontal) is drawn small unless given; ``aged``
    greys the hair and lines the face."""
    s = size * 2  # drawn at twice the size, then reduced (smooth edges)
    turn = float(r.uniform(-0.25, 0.25)) if turn is None else float(turn)
    scale = float(r.uniform(0.92, 1.08))
    cx = s * (0.5 + r.uniform(-0.04, 0.04))
    cy = s * (0.52 + r.uniform(-0.04, 0.04))
    light = float(r.uniform(0.8, 1.15))
    bg = hsv(r.random(), r.uniform(0.0, 0.5), r.uniform(0.3, 0.9))
    img = Image.new("RGB", (s, s), _rgb(tuple(bg)))
    d = ImageDraw.Draw(img)

    def px(v: float) -> float:
        return v * s * scale

    fw, fh = px(ident.face_w) * (1 - 0.25 * abs(turn)), px(ident.face_h)
    shift = turn * fw * 0.45  # the features move towards the turned side
    hair = tuple(0.75 for _ in range(3)) if aged else ident.hair
    skin = tuple(c * light for c in ident.skin)
    # hair behind the head
    if ident.hair_style == 1:
        d.ellipse([cx - fw * 1.15, cy - fh * 1.1, cx + fw * 1.15, cy + fh * 1.05], fill=_rgb(hair))
    d.ellipse([cx - fw, cy - fh, cx + fw, cy + fh], fill=_rgb(skin))
    # hair on top
    if ident.hair_style in (0, 1, 3):
        d.chord([cx - fw * 1.02, cy - fh * 1.08, cx + fw * 1.02, cy + fh * 0.2], 180, 360, fill=_rgb(hair))
    if ident.hair_style == 3:
        d.rectangle([cx - fw * 0.8, cy - fh * 0.55, cx + fw * 0.3, cy - fh * 0.35], fill=_rgb(hair))
    ey = cy + px(ident.eye_y)
    er = px(ident.eye_r)
    for side in (-1, 1):
        near = 1 - 0.5 * max(0.0, side * -turn)  # the far eye looks smaller
        ex = cx + shift + side * px(ident.eye_dx) * (1 - 0.3 * abs(turn))
        rr = er * near
        d.ellipse([ex - rr * 1.4, ey - rr, ex + rr * 1.4, ey + rr], fill=(245, 245, 245))
        d.ellipse([ex - rr * 0.7, ey - rr * 0.7, ex + rr * 0.7, ey + rr * 0.7], fill=_rgb(ident.eyes))
        if ident.brow > 0:
            bh = px(ident.brow)
            d.rectangle([ex - rr * 1.6, ey - rr * 2.2 - bh, ex + rr * 1.6, ey - rr * 2.2], fill=_rgb(hair))
        if ident.glasses:
            d.ellipse(
                [ex - rr * 2.2, ey - rr * 1.8, ex + rr * 2.2, ey + rr * 1.8],
                outline=(20, 20, 20),
                width=max(1, s // 60),
            )
    nose_x = cx + shift * 1.2
    d.line(
        [nose_x, ey + er, nose_x + turn * px(0.03), ey + er + px(ident.nose)],
        fill=_rgb(tuple(c * 0.7 for c in skin)),
        width=max(1, s // 50),
    )
    my = cy + px(ident.mouth_y)
    mw = px(ident.mouth_w) * (1 - 0.3 * abs(turn))
    d.ellipse([cx + shift - mw, my - px(0.02), cx + shift + mw, my + px(0.02)], fill=_rgb(ident.lips))
    if ident.beard:
        d.chord(
            [cx - fw * 0.9 + shift * 0.5, my - px(0.02), cx + fw * 0.9 + shift * 0.5, cy + fh * 1.02],
            0,
            180,
            fill=_rgb(hair),
        )
    if aged:
        for k in range(3):
            y = cy - fh * 0.45 + k * px(0.025)
            d.line(
                [cx - fw * 0.5, y, cx + fw * 0.5, y],
                fill=_rgb(tuple(c * 0.75 for c in skin)),
                width=max(1, s // 80),
            )
    img = img.rotate(float(r.uniform(-8, 8)), resample=Image.Resampling.BILINEAR, fillcolor=_rgb(tuple(bg)))
    img = img.resize((size, size), Image.Resampling.BILINEAR)
    arr = np.asarray(img, dtype=np.float32) / 255.0
    arr = arr + r.normal(0, 0.02, arr.shape).astype(np.float32)
    return jpeg_bytes(arr)


def _write_train(out: str, spec: FaceSpec, pids: list[int]) -> int:
    count = 0
    for pid in pids:
        ident = make_identity(spec.seed, pid)
        folder = os.path.join(out, f"{pid:05d}")
        os.makedirs(folder)
        for k in range(spec.images_per_id):
            r = rng(spec.seed, 12, pid, k)
            # a fifth of a person's photos show them older (grey hair, lines), as a celebrity's
            # photos span years: what lets a model match AgeDB-30's pairs across ages
            data = render_face(ident, r, spec.size, aged=bool(r.random() < 0.2))
            with open(os.path.join(folder, f"{k}.jpg"), "wb") as f:
                f.write(data)
            count += 1
    return count


def _write_tests(out: str, spec: FaceSpec, pids: list[int]) -> int:
    count = 0
    for set_index, name in enumerate(TEST_SETS):
        folder = os.path.join(out, name)
        os.makedirs(folder)
        r = rng(spec.seed, 13, set_index)
        lines = []
        for p in range(spec.pairs_per_set):
            same = p % 2 == 0
            a = int(r.choice(pids))
            b = a if same else int(r.choice([q for q in pids if q != a]))
            names = []
            for side, pid in enumerate((a, b)):
                turn = None
                if name == "cfp_fp":  # frontal against profile
                    turn = (
                        float(r.uniform(-0.1, 0.1))
                        if side == 0
                        else float(r.choice([-1, 1]) * r.uniform(0.6, 0.9))
                    )
                aged = name == "agedb_30" and side == 1
                image_rng = rng(spec.seed, 14, set_index, p, side)
                rel = os.path.join(f"{pid:05d}", f"{p:04d}_{side}.jpg")
                os.makedirs(os.path.join(folder, f"{pid:05d}"), exist_ok=True)
                with open(os.path.join(folder, rel), "wb") as f:
                    f.write(
                        render_face(make_identity(spec.seed, pid), image_rng, spec.size, turn=turn, aged=aged)
                    )
                names.append(rel.replace(os.sep, "/"))
                count += 1
            lines.append(f"{names[0]} {names[1]} {int(same)}")
        with open(os.path.join(folder, "pairs.txt"), "w", encoding="utf-8") as f:
            f.write(
                f"# synthetic {name}: <left> <right> <1: same person, 0: not>\n" + "\n".join(lines) + "\n"
            )
    return count


def generate_faces(
    root: str,
    spec: FaceSpec = FaceSpec(),
    overwrite: bool = False,
    verbose: bool = False,
    replace_own: bool = True,
) -> tuple[str, str]:
    """Write ``<root>/MS_Celeb_1M`` and ``<root>/faces_emore_val``; returns the two folders.
    Existing folders are replaced only when this generator wrote them (see
    :mod:`~fastreid.data.synthetic.tree`); ``overwrite`` moves anything else aside instead."""
    spec.validate()
    total = spec.num_train_ids + spec.num_test_ids
    pids = [int(p) for p in rng(spec.seed, 10).permutation(max(10000, 2 * total))[:total]]
    train_pids, test_pids = sorted(pids[: spec.num_train_ids]), sorted(pids[spec.num_train_ids :])
    info = asdict(spec)
    train = write_generated_tree(
        os.path.join(root, TRAIN_FOLDER),
        lambda out: _write_train(out, spec, train_pids),
        generator=__name__,
        what="synthetic MS1MV2",
        info=info,
        overwrite=overwrite,
        replace_own=replace_own,
        verbose=verbose,
    )
    tests = write_generated_tree(
        os.path.join(root, TEST_FOLDER),
        lambda out: _write_tests(out, spec, test_pids),
        generator=__name__,
        what="synthetic face pairs",
        info=info,
        overwrite=overwrite,
        replace_own=replace_own,
        verbose=verbose,
    )
    return train, tests


def main(argv: list[str] | None = None) -> int:
    return spec_command(
        argv,
        doc=__doc__,
        spec_type=FaceSpec,
        generate=generate_faces,
        logger_name=__name__,
        small_help="a tiny set for tests",
        helps={
            "num_train_ids": "training identities",
            "images_per_id": "images per training identity",
            "num_test_ids": "identities of the test pairs",
            "pairs_per_set": "pairs per test set (half of one person)",
            "size": "image side in pixels",
        },
        flags={"pairs_per_set": "--pairs"},
    )


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sys.exit(main())
