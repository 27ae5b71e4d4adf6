"""pyproject.toml lists every package the wheel must hold, and every console script names a
function that exists.

The package list is explicit (configs/ ships as ``fastreid.configs`` from the repository root), so a
new sub-package would silently be left out of the wheel: these checks fail first. The wheel itself
is built and used in tests/tools/test_wheel_install.py.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = pytest.importorskip("tomli")

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def setuptools_config() -> dict:
    with open(REPO / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def _packages_under(root: Path, prefix: str, holds: str) -> set[str]:
    """Dotted names of ``root`` and each folder under it that holds a ``holds`` file."""
    names = set()
    for folder in [root, *sorted(p for p in root.rglob("*") if p.is_dir())]:
        if folder.name == "__pycache__" or not any(folder.glob(holds)):
            continue
        names.add(".".join([prefix, *folder.relative_to(root).parts]))
    return names


def test_every_package_folder_is_listed(setuptools_config):
    tool = setuptools_config["tool"]["setuptools"]
    listed = set(tool["packages"])
    code = _packages_under(REPO / "fastreid", "fastreid", "*.py")
    configs = _packages_under(REPO / "configs", "fastreid.configs", "*.yml")
    assert "fastreid.configs" in configs and "fastreid.configs.Market1501" in configs
    assert sorted(code - listed) == [], "add these to [tool.setuptools] packages in pyproject.toml"
    assert sorted(configs - listed) == [], "add these config folders to [tool.setuptools] packages"
    assert sorted(listed - code - configs) == [], "packages listed in pyproject.toml that do not exist"
    assert tool["package-dir"] == {"fastreid.configs": "configs"}
    assert set(tool["package-data"]["fastreid.configs"]) >= {"*.yml", "**/*.yml"}


def test_the_check_sees_a_missing_package(tmp_path):
    """The check above can fail: a new folder with a module is a package it expects."""
    (tmp_path / "pkg" / "new").mkdir(parents=True)
    (tmp_path / "pkg" / "a.py").write_text("")
    (tmp_path / "pkg" / "new" / "b.py").write_text("")
    (tmp_path / "pkg" / "data_only").mkdir()
    assert _packages_under(tmp_path / "pkg", "fastreid", "*.py") == {"fastreid", "fastreid.new"}


def test_console_scripts_name_existing_functions(setuptools_config):
    scripts = setuptools_config["project"]["scripts"]
    assert {"fastreid-train", "fastreid-convert", "fastreid-visualize", "fastreid-build-cache"} <= set(
        scripts
    )
    for name, target in scripts.items():
        module, function = target.split(":")
        assert callable(getattr(importlib.import_module(module), function)), name
