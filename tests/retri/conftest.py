"""Fixtures of the retrieval tests: the small synthetic CUB-200-2011, written once per session
(read only), and a helper writing list-file data sets in upstream's layouts."""

from __future__ import annotations

import os

import pytest
from PIL import Image

from fastreid.data.synthetic.retrieval import RetrievalSpec, generate_cub


@pytest.fixture(scope="session")
def cub_root(tmp_path_factory) -> str:
    """A datasets root holding ``RetrievalSpec.small(seed=1)`` (6 + 6 classes of 4..5 images)."""
    root = str(tmp_path_factory.mktemp("synthetic_cub"))
    generate_cub(root, RetrievalSpec.small(seed=1))
    return root


@pytest.fixture
def write_lists(tmp_path):
    """``write_lists(folder, {list file: [(image name, label), ...]})``: tiny images and the list
    files under ``tmp_path/folder``; returns the datasets root."""

    def write(folder: str, lists: dict[str, list[tuple[str, object]]]) -> str:
        base = tmp_path / folder
        for name, entries in lists.items():
            for image, _ in entries:
                path = base / image
                path.parent.mkdir(parents=True, exist_ok=True)
                if not path.exists():
                    Image.new("RGB", (8, 8), (120, 30, 60)).save(path)
            os.makedirs(base, exist_ok=True)
            (base / name).write_text("".join(f"{image},{label}\n" for image, label in entries))
        return str(tmp_path)

    return write
