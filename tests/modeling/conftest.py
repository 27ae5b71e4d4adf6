"""Fixtures shared by the modeling tests."""

import pytest


@pytest.fixture(scope="module", autouse=True)
def one_thread(one_torch_thread):
    """Every test here runs torch on one thread (see tests/conftest.py)."""
