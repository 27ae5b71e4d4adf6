"""The suite's own layout. Test folders have no ``__init__.py``, so pytest imports each test file
under its base name: a second ``test_x.py`` in another folder fails to collect ("import file
mismatch"), and only on the worker that meets both, which the split of files between workers
decides."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_test_files_have_unique_names():
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert sorted(n for n, count in names.items() if count > 1) == []
