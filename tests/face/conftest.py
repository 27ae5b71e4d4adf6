"""Fixtures of the face tests: the small synthetic faces (``FaceSpec.small``), written once per
session (read only)."""

from __future__ import annotations

import pytest

from fastreid.data.synthetic.faces import FaceSpec, generate_faces


@pytest.fixture(scope="session")
def faces_root(tmp_path_factory) -> str:
    """A datasets root holding 12 training identities of 4 images and 40 pairs per test set."""
    root = str(tmp_path_factory.mktemp("synthetic_faces"))
    generate_faces(root, FaceSpec.small(seed=1))
    return root
