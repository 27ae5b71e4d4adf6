"""Shared fixtures of the data tests."""

from __future__ import annotations

import os

import pytest
from dataset_layouts import LAYOUTS


@pytest.fixture
def layout_root(tmp_path):
    """A function writing the tree of a registry name under a fresh root; returns (root, expected)."""

    def make(name: str):
        root = str(tmp_path / "datasets")
        os.makedirs(root, exist_ok=True)
        return root, LAYOUTS[name](root)

    return make
