"""Fixtures of the partial re-ID tests: the small synthetic Market-1501 and partial sets, written
once per session (read only)."""

from __future__ import annotations

import pytest

from fastreid.data.synthetic import SyntheticSpec, generate_market1501
from fastreid.data.synthetic.partial import PartialSpec, generate_partial


@pytest.fixture(scope="session")
def partial_root(tmp_path_factory) -> str:
    """A datasets root with ``SyntheticSpec.small()`` (Market-1501) and ``PartialSpec.small()``."""
    root = str(tmp_path_factory.mktemp("synthetic_partial"))
    generate_market1501(root, SyntheticSpec.small(seed=1))
    generate_partial(root, PartialSpec.small(seed=1))
    return root
