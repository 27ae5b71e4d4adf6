"""The synthetic PA-100K: PA-100K's layout and keys, labels consistent with what is drawn, the same
bytes for the same arguments, and the persons of the synthetic Market-1501 unchanged by the
optional parts the attribute generator draws."""

from __future__ import annotations

import hashlib
import os

import numpy as np
import pytest

from fastreid.data.synthetic.attributes import (
    ATTRIBUTES,
    AttributeSpec,
    attribute_identity,
    generate_pa100k,
    labels_of,
    main,
)
from fastreid.data.synthetic.common import SyntheticSpecError, palette, rng
from fastreid.data.synthetic.person_images import (
    BACK,
    FRONT,
    SIDE,
    make_camera,
    make_identity,
    render,
    render_with_view,
)
from fastreid.data.synthetic.tree import GeneratedTreeError


def _digest(folder: str) -> str:
    h = hashlib.sha256()
    for dirpath, _, files in sorted(os.walk(folder)):
        for name in sorted(files):
            if name.startswith(".fastreid"):
                continue  # the marker holds the time of writing
            h.update(name.encode())
            with open(os.path.join(dirpath, name), "rb") as f:
                h.update(f.read())
    return h.hexdigest()


def test_layout_keys_and_labels(pa100k_root):
    from scipy.io import loadmat

    folder = os.path.join(pa100k_root, "PA-100K")
    mat = loadmat(os.path.join(folder, "annotation.mat"))
    assert [str(a[0][0]) for a in mat["attributes"]] == list(ATTRIBUTES)
    total = 0
    for split, n in (("train", 48), ("val", 8), ("test", 16)):
        labels = mat[f"{split}_label"]
        assert labels.shape == (n, 26) and labels.dtype == np.uint8 and set(np.unique(labels)) <= {0, 1}
        for i in range(n):
            assert os.path.isfile(os.path.join(folder, "data", str(mat[f"{split}_images_name"][i, 0][0])))
        on = {name: labels[:, j].astype(bool) for j, name in enumerate(ATTRIBUTES)}
        # exactly one age group, one viewpoint, one sleeve length and one lower-body garment each
        for group in (
            ("AgeOver60", "Age18-60", "AgeLess18"),
            ("Front", "Side", "Back"),
            ("ShortSleeve", "LongSleeve"),
            ("Trousers", "Shorts", "Skirt&Dress"),
        ):
            assert (sum(on[g].astype(int) for g in group) == 1).all(), group
        assert not (on["Back"] & (on["Glasses"] | on["UpperLogo"] | on["HoldObjectsInFront"])).any()
        total += n
    assert len(os.listdir(os.path.join(folder, "data"))) == total


def test_labels_follow_the_identity_and_the_view():
    pal = palette(rng(0, 4))
    ident, person = attribute_identity(0, 5, pal)
    front, back = labels_of(ident, person, FRONT), labels_of(ident, person, BACK)
    index = {name: i for i, name in enumerate(ATTRIBUTES)}
    assert front[index["Front"]] == 1 and back[index["Back"]] == 1
    assert labels_of(ident, person, SIDE)[index["Side"]] == 1
    assert front[index["Female"]] == person.female and back[index["LongCoat"]] == ident.long_coat
    assert back[index["Glasses"]] == 0 and front[index["Glasses"]] == ident.glasses
    # an identity is a pure function of (seed, pid)
    again, _ = attribute_identity(0, 5, pal)
    assert again.glasses == ident.glasses and np.array_equal(again.top, ident.top)


def test_same_arguments_same_bytes_and_the_tree_rules(tmp_path, pa100k_root):
    generate_pa100k(str(tmp_path), AttributeSpec.small(seed=1))
    assert _digest(str(tmp_path / "PA-100K")) == _digest(os.path.join(pa100k_root, "PA-100K"))
    generate_pa100k(str(tmp_path), AttributeSpec.small(seed=2))  # its own tree: replaced
    assert _digest(str(tmp_path / "PA-100K")) != _digest(os.path.join(pa100k_root, "PA-100K"))
    (tmp_path / "PA-100K" / "mine.txt").write_text("a file the generator did not write")
    with pytest.raises(GeneratedTreeError):
        generate_pa100k(str(tmp_path), AttributeSpec.small(seed=1))
    with pytest.raises(SyntheticSpecError, match="validation"):
        generate_pa100k(str(tmp_path / "x"), AttributeSpec(4, 0, 2))


def test_the_command_line(tmp_path, capsys):
    assert main(["--root", str(tmp_path), "--small", "--seed", "4"]) == 0
    assert "wrote 72 images" in capsys.readouterr().out
    assert os.path.isfile(tmp_path / "PA-100K" / "annotation.mat")


def test_market_persons_are_drawn_as_before():
    """make_identity leaves the optional parts off, and render is render_with_view's bytes."""
    pal = palette(rng(3, 4))
    ident = make_identity(3, 17, pal)
    assert not ident.glasses and ident.handbag is None and ident.held is None and not ident.boots
    assert ident.lower_pattern == 0 and not ident.long_coat
    cam = make_camera(3, 2)
    data, view = render_with_view(ident, cam, rng(3, 5, 17))
    assert data == render(ident, cam, rng(3, 5, 17)) and view in (FRONT, BACK, SIDE)
    assert render_with_view(None, cam, rng(3, 9), "junk")[1] is None
