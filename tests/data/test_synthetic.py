"""The synthetic Market-1501: layout Market1501 reads, file names, determinism."""

from __future__ import annotations

import hashlib
import os
import re

import pytest

from fastreid.data.datasets import Market1501
from fastreid.data.datasets.synthetic import SyntheticSpec, generate_market1501, main, raw_pixel_baseline

NAME = re.compile(r"^(-1|\d{4})_c[1-6]s[1-6]_\d{6}_\d{2}\.jpg$")


def _digest(folder):
    h = hashlib.sha256()
    for dirpath, _, files in sorted(os.walk(folder)):
        for f in sorted(files):
            h.update(f.encode())
            with open(os.path.join(dirpath, f), "rb") as fh:
                h.update(fh.read())
    return h.hexdigest()


@pytest.fixture(scope="module")
def small_set(tmp_path_factory):
    root = tmp_path_factory.mktemp("syn")
    out = generate_market1501(str(root), SyntheticSpec.small(seed=3))
    return root, out


def test_layout_names_and_market_reader(small_set):
    root, out = small_set
    spec = SyntheticSpec.small()
    for d in ("bounding_box_train", "bounding_box_test", "query"):
        names = os.listdir(os.path.join(out, d))
        assert names and all(NAME.match(n) for n in names), names[:3]
    gallery_names = os.listdir(os.path.join(out, "bounding_box_test"))
    assert sum(n.startswith("0000_") for n in gallery_names) == spec.num_distractors
    assert sum(n.startswith("-1_") for n in gallery_names) == spec.num_junk

    ds = Market1501(root=str(root))
    assert ds.num_train_pids == spec.num_train_ids
    test_ids = {p for _, p, _ in ds.query}
    assert len(test_ids) == spec.num_test_ids
    assert test_ids <= {p for _, p, _ in ds.gallery} | {0}
    assert not test_ids & {int(p.split("_")[1]) for _, p, _ in ds.train}  # disjoint train / test ids
    # every query has a gallery match from another camera (a valid Market query)
    gallery = {(p, c) for _, p, c in ds.gallery}
    for _, pid, cam in ds.query:
        assert any(p == pid and c != cam for p, c in gallery)

    from PIL import Image

    with Image.open(ds.train[0][0]) as im:
        assert im.size == (64, 128) and im.mode == "RGB"


def test_same_seed_same_bytes_other_seed_differs(small_set, tmp_path):
    _, out = small_set
    again = generate_market1501(str(tmp_path / "a"), SyntheticSpec.small(seed=3))
    assert _digest(again) == _digest(out)
    other = generate_market1501(str(tmp_path / "b"), SyntheticSpec.small(seed=4))
    assert _digest(other) != _digest(out)


def test_cli_and_refusal_to_clobber(tmp_path, capsys):
    assert main(["--root", str(tmp_path), "--small", "--seed", "1"]) == 0
    assert "wrote" in capsys.readouterr().out
    assert main(["--root", str(tmp_path), "--small", "--no-overwrite"]) == 2
    (tmp_path / "Market-1501-v15.09.15" / "mine.txt").write_text("do not delete")
    assert main(["--root", str(tmp_path), "--small"]) == 2
    assert "not replacing" in capsys.readouterr().err


def test_invalid_spec():
    with pytest.raises(ValueError, match="at most 1500"):
        SyntheticSpec(num_train_ids=1000, num_test_ids=600).validate()


def test_raw_pixel_baseline_runs(small_set):
    _, out = small_set
    res = raw_pixel_baseline(out)
    assert res["queries"] > 0 and 0.0 <= res["Rank-1"] <= 100.0
