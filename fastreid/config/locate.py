"""Where the config file named on a command line is: the working directory first, then the
configs that came with the package.

Upstream's habit is ``--config-file configs/Market1501/bagtricks_R50.yml`` run from a checkout.
A pip-installed fastreid ships the same folder as ``fastreid/configs`` (package data of the wheel),
so that command also works from any other directory: a relative path that is not there is looked
up in the shipped configs, and one log line says which file is used. ``_BASE_`` paths inside the
configs are relative to each file, so they resolve inside the shipped folder too. Every tool that
takes ``--config-file`` resolves it through :func:`resolve_config_file`.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path, PurePath

__all__ = ["packaged_config_file", "packaged_configs_dir", "resolve_config_file"]

logger = logging.getLogger(__name__)

_PACKAGE = Path(__file__).resolve().parents[1]  # the fastreid folder
CONFIGS = "configs"


def packaged_configs_dir() -> str | None:
    """The folder of the configs that came with the package, or None.

    In an installed wheel, ``fastreid/configs``; in a checkout (also an editable install), the
    ``configs/`` folder next to ``fastreid/`` (the folder that holds ``pyproject.toml``).
    """
    installed = _PACKAGE / CONFIGS
    if installed.is_dir():
        return str(installed)
    checkout = _PACKAGE.parent
    if (checkout / CONFIGS).is_dir() and (checkout / "pyproject.toml").is_file():
        return str(checkout / CONFIGS)
    return None


def packaged_config_file(path: str) -> str | None:
    """The shipped config that the relative ``path`` names, or None.

    ``configs/Market1501/bagtricks_R50.yml`` and ``Market1501/bagtricks_R50.yml`` both name
    ``Market1501/bagtricks_R50.yml`` of the shipped folder; ``\\`` separators are accepted, an
    absolute path or one leaving the folder (``..``) names nothing.
    """
    root = packaged_configs_dir()
    if root is None or not path or os.path.isabs(path):
        return None
    parts = [p for p in PurePath(path.replace("\\", "/")).parts if p not in ("", ".")]
    if parts and parts[0] == CONFIGS:
        parts = parts[1:]
    if not parts or ".." in parts:
        return None
    candidate = os.path.join(root, *parts)
    return candidate if os.path.isfile(candidate) else None


def resolve_config_file(path: str) -> str:
    """``path`` when it exists (or names nothing shipped), else the shipped config it names.

    A path found nowhere is returned unchanged, so that merging it fails as before with
    "Config file not found: <path>". Usable as an ``argparse`` ``type=``.
    """
    if not path or os.path.exists(os.path.expanduser(path)):
        return path
    packaged = packaged_config_file(path)
    if packaged is None:
        return path
    # A warning so that the line shows even before a tool has set up logging.
    logger.warning(
        f"Config file {path} is not in {os.getcwd()}; using the one shipped with fastreid: {packaged}"
    )
    return packaged
