"""Fixtures of the attribute tests: the small synthetic PA-100K, written once per session (read only)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def pa100k_root(tmp_path_factory) -> str:
    """A datasets root holding ``AttributeSpec.small(seed=1)`` (48 train, 8 val, 16 test images)."""
    from fastreid.data.synthetic.attributes import AttributeSpec, generate_pa100k

    root = str(tmp_path_factory.mktemp("synthetic_pa100k"))
    generate_pa100k(root, AttributeSpec.small(seed=1))
    return root
