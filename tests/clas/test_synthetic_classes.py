"""The synthetic Hymenoptera: upstream's folder layout, the same bytes for the same arguments, more
classes on request, sizes it cannot honour refused, and a foreign folder never replaced."""

from __future__ import annotations

import hashlib
import io
import os

import numpy as np
import pytest
from PIL import Image

from fastreid.data.synthetic.classes import (
    ANT,
    BEE,
    ClassesSpec,
    body_plan,
    draw_image,
    generate_classes,
    main,
)
from fastreid.data.synthetic.common import SyntheticSpecError, rng
from fastreid.data.synthetic.tree import GeneratedTreeError
from fastreid.projects.clas import Hymenoptera


def _digest(folder: str) -> str:
    h = hashlib.sha256()
    for dirpath, dirnames, files in os.walk(folder):
        dirnames.sort()
        for name in sorted(files):
            if name.startswith(".fastreid"):
                continue  # the marker holds the time of writing
            h.update(os.path.relpath(os.path.join(dirpath, name), folder).encode())
            with open(os.path.join(dirpath, name), "rb") as f:
                h.update(f.read())
    return h.hexdigest()


def test_layout_and_images(hymenoptera_root):
    folder = os.path.join(hymenoptera_root, "hymenoptera_data")
    for split, n in (("train", 8), ("val", 4)):
        assert sorted(os.listdir(os.path.join(folder, split))) == ["ants", "bees"]
        for name in ("ants", "bees"):
            files = sorted(os.listdir(os.path.join(folder, split, name)))
            assert files == [f"{k:05d}.jpg" for k in range(1, n + 1)]
    with Image.open(os.path.join(folder, "train", "bees", "00001.jpg")) as img:
        assert img.format == "JPEG" and img.size == (48, 40) and img.mode == "RGB"


def test_the_classes_differ_where_they_are_drawn():
    """Bees are bright with stripes and wings, ants dark without: the mean colour of the images
    already separates them a little; the rest is shape."""
    assert ANT.value < 0.3 < BEE.value and BEE.stripes and BEE.wings and not ANT.stripes and not ANT.wings
    assert body_plan(0, 0) is ANT and body_plan(0, 1) is BEE
    assert body_plan(0, 2) == body_plan(0, 2) != body_plan(1, 2)


def test_same_arguments_same_bytes_and_more_classes(tmp_path):
    spec = ClassesSpec.small(seed=3, num_classes=6)
    a = generate_classes(str(tmp_path / "a"), spec)
    b = generate_classes(str(tmp_path / "b"), spec)
    assert _digest(a) == _digest(b)
    data = Hymenoptera(root=str(tmp_path / "a"))
    assert data.classes == ["ants", "bees", "bumblebees", "hornets", "sawflies", "wasps"]
    assert len(data.train) == 48 and len(data.val) == 24
    assert spec.class_names()[:2] == ["ants", "bees"]
    assert ClassesSpec(num_classes=12).class_names()[-2:] == ["species_10", "species_11"]
    generate_classes(str(tmp_path / "a"), ClassesSpec.small(seed=4))  # its own folder: replaced
    assert Hymenoptera(root=str(tmp_path / "a")).classes == ["ants", "bees"]


def test_sizes_it_cannot_honour_are_refused(tmp_path):
    for spec in (ClassesSpec(num_classes=1), ClassesSpec(num_val=0), ClassesSpec(width=16)):
        with pytest.raises(SyntheticSpecError):
            generate_classes(str(tmp_path), spec)


def test_a_foreign_folder_is_never_replaced(tmp_path, capsys):
    foreign = tmp_path / "hymenoptera_data"
    foreign.mkdir()
    (foreign / "mine.txt").write_text("the user's")
    with pytest.raises(GeneratedTreeError):
        generate_classes(str(tmp_path), ClassesSpec.small())
    assert main(["--root", str(tmp_path), "--small"]) != 0
    assert (foreign / "mine.txt").read_text() == "the user's"
    assert main(["--root", str(tmp_path / "new"), "--small", "--num-classes", "3"]) == 0
    assert "wrote 36 images" in capsys.readouterr().out


def test_images_are_not_constant():
    spec = ClassesSpec.small()
    pixels = [np.asarray(Image.open(io.BytesIO(draw_image(spec, ANT, rng(0, k))))) for k in range(3)]
    assert all(p.shape == (40, 48, 3) and p.std() > 5 for p in pixels)
    assert not np.array_equal(pixels[0], pixels[1])
