"""Which trainer the standard command (``fastreid-train``, ``tools/train_net.py``) runs a config with.

:class:`~fastreid.engine.defaults.DefaultTrainer`, unless a task family registered its own trainer
for the config's meta architecture or head: upstream's projects each ship a ``train_net.py`` with a
Trainer subclass (FastAttr's ``AttrTrainer`` builds its attribute data sets, the sample weights of
its loss and its evaluator); here the family calls :func:`register_trainer` when it is imported,
which a config naming one of the family's names causes (:mod:`fastreid.config.families`), and the
command asks :func:`trainer_for`. One front door, no per-family script.

A family is known by its meta architecture (``AttrBaseline``) or, when it trains upstream's plain
``Baseline``, by its head (FastClas: ``Baseline`` with ``ClasHead``). The meta architecture decides
first; a class that subclasses a registered one (a user's variant of ``AttrBaseline`` or of
``ClasHead``) trains with that one's trainer.
"""

from __future__ import annotations

from typing import Any, Optional

from fastreid.modeling.heads.build import HEADS_REGISTRY
from fastreid.modeling.meta_arch.build import META_ARCH_REGISTRY

from .defaults import DefaultTrainer

__all__ = ["register_trainer", "trainer_for", "registered_trainers"]

_TRAINERS: dict[type, type[DefaultTrainer]] = {}


def register_trainer(meta_architecture: type, trainer: type[DefaultTrainer]) -> None:
    """Train models of ``meta_architecture`` (a class, and its subclasses) with ``trainer``.

    ``meta_architecture`` may also be a head class (of ``HEADS_REGISTRY``): configs naming it in
    ``MODEL.HEADS.NAME`` then train with ``trainer`` unless their meta architecture has a trainer
    of its own."""
    if not (isinstance(trainer, type) and issubclass(trainer, DefaultTrainer)):
        raise TypeError(f"register_trainer: {trainer!r} is not a DefaultTrainer subclass")
    _TRAINERS[meta_architecture] = trainer


def registered_trainers() -> dict[type, type[DefaultTrainer]]:
    """Meta architecture (or head) class -> trainer class, as registered."""
    return dict(_TRAINERS)


def _registered_for(registry: Any, name: str) -> Optional[type[DefaultTrainer]]:
    """The trainer of class ``name`` of ``registry`` or of its nearest registered base class."""
    if name not in registry:
        return None  # build_model names the classes there are
    for cls in registry.get(name).__mro__:
        if cls in _TRAINERS:
            return _TRAINERS[cls]
    return None


def trainer_for(cfg: Any) -> type[DefaultTrainer]:
    """The trainer class of ``cfg``: the one registered for ``MODEL.META_ARCHITECTURE`` (or its
    nearest registered base class), else the one registered for ``MODEL.HEADS.NAME`` (likewise),
    else :class:`DefaultTrainer`."""
    return (
        _registered_for(META_ARCH_REGISTRY, cfg.MODEL.META_ARCHITECTURE)
        or _registered_for(HEADS_REGISTRY, cfg.MODEL.HEADS.NAME)
        or DefaultTrainer
    )
