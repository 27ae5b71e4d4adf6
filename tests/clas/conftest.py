"""Fixtures of the classification tests: small synthetic Hymenoptera sets, written once per session (read only)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def hymenoptera_root(tmp_path_factory) -> str:
    """A datasets root holding ``ClassesSpec.small(seed=1)``: ants and bees, 8 train and 4 val
    images of each, 48 x 40 pixels."""
    from fastreid.data.synthetic.classes import ClassesSpec, generate_classes

    root = str(tmp_path_factory.mktemp("synthetic_hymenoptera"))
    generate_classes(root, ClassesSpec.small(seed=1))
    return root
