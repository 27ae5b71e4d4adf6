"""Tiny synthetic pedestrians for the project tests: 32 x 16 PNG images whose upper and lower
halves are coloured by identity (so colour attributes are known), with pixel noise.

    <root>/TinyPeople/{train,query,gallery}/<pid:04d>_c<cam>_<n:02d>.png

Training identities 1..6 (two cameras, two images each), test identities 7..10: one query image
(camera 1) and two gallery images (cameras 2 and 3) each.
"""

from __future__ import annotations

import os

import numpy as np
from PIL import Image

FOLDER = "TinyPeople"
COLOURS = {"red": (200, 40, 40), "green": (40, 170, 60), "blue": (40, 60, 200), "yellow": (220, 200, 40)}
HEIGHT, WIDTH = 32, 16
TRAIN_IDS = range(1, 7)
TEST_IDS = range(7, 11)


def colours_of(pid: int) -> tuple[str, str]:
    """The (upper, lower) colour names of identity ``pid``."""
    names = list(COLOURS)
    return names[pid % 4], names[(pid // 4 + pid) % 4]


def _image(pid: int, rng: np.random.Generator) -> Image.Image:
    upper, lower = colours_of(pid)
    pixels = np.empty((HEIGHT, WIDTH, 3), dtype=np.float64)
    pixels[: HEIGHT // 2] = COLOURS[upper]
    pixels[HEIGHT // 2 :] = COLOURS[lower]
    pixels += rng.normal(scale=20.0, size=pixels.shape)
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def write_tiny_people(root: str, seed: int = 0) -> str:
    """Write the set under ``root``; returns its folder."""
    rng = np.random.default_rng(seed)
    folder = os.path.join(root, FOLDER)
    plan = [("train", pid, cam, n) for pid in TRAIN_IDS for cam in (1, 2) for n in (0, 1)]
    plan += [("query", pid, 1, 0) for pid in TEST_IDS]
    plan += [("gallery", pid, cam, 0) for pid in TEST_IDS for cam in (2, 3)]
    for split, pid, cam, n in plan:
        os.makedirs(os.path.join(folder, split), exist_ok=True)
        _image(pid, rng).save(os.path.join(folder, split, f"{pid:04d}_c{cam}_{n:02d}.png"))
    return folder


def parse_name(name: str) -> tuple[int, int]:
    """``(pid, camera)`` of a file name of this set."""
    pid, cam, _ = os.path.splitext(name)[0].split("_")
    return int(pid), int(cam[1:])
