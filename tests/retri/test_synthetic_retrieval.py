"""The synthetic CUB-200-2011: upstream FastRetri's layout (list files of ``path,label``, training
and test classes apart), class folders named after the object kind, the same bytes for the same
arguments, a generated folder replaced but never a foreign one, and sizes it cannot honour refused."""

from __future__ import annotations

import hashlib
import os

import numpy as np
import pytest
from PIL import Image

from fastreid.data.synthetic.common import SyntheticSpecError
from fastreid.data.synthetic.retrieval import RetrievalSpec, generate_cub, kind_name, main, object_kinds
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


def _lines(path: str) -> list[tuple[str, int]]:
    with open(path, encoding="utf-8") as f:
        return [(p, int(label)) for p, label in (line.rsplit(",", 1) for line in f.read().splitlines())]


def test_layout_labels_and_kinds(cub_root):
    folder = os.path.join(cub_root, "CUB_200_2011")
    spec = RetrievalSpec.small(seed=1)
    train, test = _lines(os.path.join(folder, "train.txt")), _lines(os.path.join(folder, "test.txt"))
    assert {label for _, label in train} == set(range(1, 7)) and {label for _, label in test} == set(
        range(7, 13)
    )
    kinds = object_kinds(spec)
    assert len(set(kinds)) == 12  # every class a different object kind
    for path, label in train + test:
        assert path == f"images/{label:03d}.{kind_name(kinds[label - 1])}/{os.path.basename(path)}"
        with Image.open(os.path.join(folder, path)) as img:
            assert img.size == (32, 32) and img.mode == "RGB"
    counts = np.bincount([label for _, label in train + test])[1:]
    assert counts.min() >= 4 and counts.max() <= 5


def test_same_arguments_same_bytes_and_a_generated_folder_is_replaced(cub_root, tmp_path):
    generate_cub(str(tmp_path), RetrievalSpec.small(seed=1))
    assert _digest(os.path.join(str(tmp_path), "CUB_200_2011")) == _digest(
        os.path.join(cub_root, "CUB_200_2011")
    )
    generate_cub(str(tmp_path), RetrievalSpec.small(seed=2))  # its own folder: replaced
    assert _digest(os.path.join(str(tmp_path), "CUB_200_2011")) != _digest(
        os.path.join(cub_root, "CUB_200_2011")
    )


def test_a_foreign_folder_is_never_replaced(tmp_path):
    (tmp_path / "CUB_200_2011").mkdir()
    (tmp_path / "CUB_200_2011" / "train.txt").write_text("the real one\n")
    with pytest.raises(GeneratedTreeError):
        generate_cub(str(tmp_path), RetrievalSpec.small())
    assert (tmp_path / "CUB_200_2011" / "train.txt").read_text() == "the real one\n"


def test_the_command_writes_the_small_set(tmp_path, capsys):
    assert main(["--root", str(tmp_path), "--small", "--seed", "1"]) == 0
    assert "wrote" in capsys.readouterr().out
    assert len(_lines(str(tmp_path / "CUB_200_2011" / "train.txt"))) >= 24


@pytest.mark.parametrize(
    "spec, message",
    [
        (RetrievalSpec(num_train_classes=0), "at least one training and one test class"),
        (RetrievalSpec(num_train_classes=100, num_test_classes=100), "at most 192 classes"),
        (RetrievalSpec(min_images=1), "min_images"),
        (RetrievalSpec(size=8), "too small"),
    ],
)
def test_sizes_it_cannot_honour_are_refused(spec, message, tmp_path):
    with pytest.raises(SyntheticSpecError, match=message):
        generate_cub(str(tmp_path), spec)
