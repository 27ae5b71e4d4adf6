"""The config a run saves: a ``config.yaml`` upstream FastReID reads, and this package's keys beside it.

Upstream's ``get_cfg().merge_from_file(path)`` (yacs) refuses a key it does not know and a value
whose type differs from its default's. So :func:`save_config` splits the config in two files:

- ``config.yaml``: upstream's keys only (those of ``fastreid/config/defaults.py`` and those a task
  family or user code added), each value in a type upstream's yacs accepts. A value of another
  type is written in the default's type where that loses nothing (``64.0`` for an int default as
  ``64``, ``1`` for a float default as ``1.0``); one that cannot be (``HEADS.SCALE 30.5``, which
  upstream's own YAML cannot hold either) is written as it is, with a warning;
- ``config.fastreid.yaml`` (:func:`side_file`): the keys :mod:`fastreid.config.fastreid_keys` adds
  (``FASTREID_KEYS``), every one with its value, so the run reads back the same whatever later
  versions change in the defaults.

:meth:`fastreid.config.CfgNode.merge_from_file` reads a file's side file first and the file over
it (:func:`read_side_file`): a key set in ``config.yaml`` by hand wins. A file without a side file
(upstream's configs, a user's, a dump of an older version with every key inline) reads as before.
``config.yaml`` starts with a comment naming its side file; when that file is missing (the
``config.yaml`` was copied alone) a warning says that this package's keys take their defaults.

``cfg.dump()`` stays the whole config in one text (logs, hashes); what a run writes to disk goes
through :func:`save_config`.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Mapping
from typing import Any, BinaryIO, Callable, Optional

from fvcore.common.config import CfgNode as CN

from fastreid.utils.atomic import atomic_write

from .defaults import _C, FASTREID_KEYS

__all__ = ["SIDE_FILE_MARK", "read_side_file", "save_config", "side_file", "split_config"]

logger = logging.getLogger(__name__)

#: The words of the first comment of a ``config.yaml`` whose side file holds this package's keys.
SIDE_FILE_MARK = "this package's own keys are in"
_SIDE_INFIX = ".fastreid"


def side_file(path: str) -> str:
    """Where the keys of this package that belong to config file ``path`` are:
    ``logs/run/config.yaml`` -> ``logs/run/config.fastreid.yaml``."""
    root, ext = os.path.splitext(path)
    return f"{root}{_SIDE_INFIX}{ext or '.yaml'}"


def _is_side_file(path: str) -> bool:
    return os.path.splitext(path)[0].endswith(_SIDE_INFIX)


def _upstream_default(full_key: str) -> Any:
    node: Any = _C
    for part in full_key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _yacs_accepts(value: Any, default: Any) -> bool:
    """Whether upstream's yacs merges ``value`` over ``default`` (its ``_check_and_coerce_cfg_value_type``)."""
    if type(value) is type(default) or value is None or default is None:
        return True
    return isinstance(value, (list, tuple)) and isinstance(default, (list, tuple))


def _in_upstream_type(full_key: str, value: Any) -> Any:
    """``value`` as upstream's yacs accepts it for ``full_key``, where that loses nothing."""
    default = _upstream_default(full_key)
    if _yacs_accepts(value, default):
        return value
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if number and type(default) is float:
        return float(value)
    if number and type(default) is int and float(value).is_integer():
        return int(value)
    logger.warning(
        f"config.yaml: {full_key} {value!r} is written as it is; upstream FastReID expects "
        f"{type(default).__name__} there and will refuse it"
    )
    return value


def split_config(cfg: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(upstream's part, this package's part)`` of ``cfg`` as nested dicts: the keys in
    ``FASTREID_KEYS`` go to the second, every other key to the first (in a type upstream accepts).
    A section that holds only this package's keys is left out of the first."""

    def walk(node: Mapping[str, Any], prefix: str) -> tuple[dict[str, Any], dict[str, Any]]:
        upstream: dict[str, Any] = {}
        own: dict[str, Any] = {}
        for key, value in node.items():
            full = f"{prefix}{key}"
            if isinstance(value, Mapping):
                up, mine = walk(value, f"{full}.")
                if up or not mine:
                    upstream[key] = up
                if mine:
                    own[key] = mine
            elif full in FASTREID_KEYS:
                own[key] = value
            else:
                upstream[key] = _in_upstream_type(full, value)
        return upstream, own

    return walk(cfg, "")


def save_config(cfg: Mapping[str, Any], path: str, *, header: str = "") -> tuple[str, str]:
    """Write ``cfg`` as ``path`` (upstream's keys) and its :func:`side_file` (this package's);
    returns both paths. ``header`` (comment lines, without ``#``) goes at the top of ``path``.
    The folder is made if missing."""
    upstream, own = split_config(cfg)
    side = side_file(path)
    comments = [*header.splitlines(), f"upstream FastReID's keys; {SIDE_FILE_MARK} {os.path.basename(side)}"]
    text = "".join(f"# {line}\n" for line in comments) + CN(upstream).dump()
    own_text = (
        f"# fastreid's keys of {os.path.basename(path)} (upstream FastReID has none of them)\n"
        + CN(own).dump()
    )
    for target, content in ((side, own_text), (path, text)):  # each replaced at once, never half-written
        atomic_write(target, functools.partial(_write_bytes, content.encode("utf-8")))
    return path, side


def _write_bytes(data: bytes, f: BinaryIO) -> None:
    f.write(data)


def _names_side_file(text: str) -> bool:
    """Whether the leading comments of a config file's ``text`` say a side file belongs to it."""
    for line in text.splitlines():
        if not line.startswith("#"):
            return False
        if SIDE_FILE_MARK in line:
            return True
    return False


def read_side_file(path: str, text: str, read: Callable[[str], dict[str, Any]]) -> Optional[dict[str, Any]]:
    """The mapping of config file ``path``'s side file (read with ``read``), or None when it has
    none. ``text`` is the file's own text: when its header names a side file that is missing, a
    warning says that this package's keys take their defaults."""
    if _is_side_file(path):
        return None
    side = side_file(path)
    if os.path.isfile(side):
        return read(side)
    if _names_side_file(text):
        logger.warning(
            f"{path} was saved with fastreid's own keys in {side}, which is missing: those keys "
            "(MODEL.PRECISION, DATALOADER.*, SEED, ...) take their defaults; copy it beside the file"
        )
    return None
