"""Registering a family's classes so that upstream's own project can still be loaded next to it.

Upstream's ``projects/FastAttr/train_net.py`` imports its ``fastattr`` package, which registers
``PA100K``, ``AttrHead``, ``AttrBaseline`` ... under the same names as ``fastreid.projects.attr``,
and then merges a config that names them, which imports the family (``fastreid.config.families``).
A second ``register`` of a name fails in fvcore's registry; :func:`register_once` leaves the
first registration (the user's project) in place instead.
"""

from __future__ import annotations

import logging
from typing import Any, TypeVar

__all__ = ["register_once"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


def register_once(registry: Any, obj: T) -> T:
    """Register ``obj`` in ``registry`` under its ``__name__`` unless that name is registered
    already (by another class: that one stays); returns ``obj``."""
    name = obj.__name__  # type: ignore[attr-defined]
    if name in registry:
        if registry.get(name) is not obj:
            logger.info(f"{name} is registered already by {registry.get(name)!r}; that one is used")
        return obj
    registry.register(obj)
    return obj
