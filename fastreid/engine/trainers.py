"""Which trainer the standard command (``fastreid-train``, ``tools/train_net.py``) runs a config with.

:class:`~fastreid.engine.defaults.DefaultTrainer`, unless a task family registered its own trainer
for the config's meta architecture: upstream's projects each ship a ``train_net.py`` with a Trainer
subclass (FastAttr's ``AttrTrainer`` builds its attribute data sets, the sample weights of its loss
and its evaluator); here the family calls :func:`register_trainer` when it is imported, which a
config naming the family's meta architecture causes (:mod:`fastreid.config.families`), and the
command asks :func:`trainer_for`. One front door, no per-family script.

A meta architecture that subclasses a registered one (a user's variant of ``AttrBaseline``)
trains with that one's trainer. A family whose configs use the standard ``Baseline`` (upstream's
FastRetri: only its data sets and its evaluator are its own) registers its trainer for a data set
class instead: a config whose meta architecture has no trainer of its own trains with the trainer
of the first data set of ``DATASETS.TESTS``, then ``DATASETS.NAMES``, that has one.
"""

from __future__ import annotations

from typing import Any

from fastreid.data.datasets import DATASET_REGISTRY
from fastreid.modeling.meta_arch.build import META_ARCH_REGISTRY

from .defaults import DefaultTrainer

__all__ = ["register_trainer", "trainer_for", "registered_trainers"]

_TRAINERS: dict[type, type[DefaultTrainer]] = {}


def register_trainer(meta_architecture: type, trainer: type[DefaultTrainer]) -> None:
    """Train models of ``meta_architecture`` (a class, and its subclasses) with ``trainer``; or,
    given a data set class, configs that test (or train) on it or a subclass of it, unless their
    meta architecture has a trainer."""
    if not (isinstance(trainer, type) and issubclass(trainer, DefaultTrainer)):
        raise TypeError(f"register_trainer: {trainer!r} is not a DefaultTrainer subclass")
    _TRAINERS[meta_architecture] = trainer


def registered_trainers() -> dict[type, type[DefaultTrainer]]:
    """Meta architecture (or data set) class -> trainer class, as registered."""
    return dict(_TRAINERS)


def trainer_for(cfg: Any) -> type[DefaultTrainer]:
    """The trainer class of ``cfg.MODEL.META_ARCHITECTURE``: the one registered for that class or
    the nearest registered base class; else the one of the first data set of ``DATASETS.TESTS``,
    then ``DATASETS.NAMES``, that has one (registered for its class or a base class); else
    :class:`DefaultTrainer`."""
    name = cfg.MODEL.META_ARCHITECTURE
    if name not in META_ARCH_REGISTRY:
        return DefaultTrainer  # build_model names the architectures there are
    found = _registered(META_ARCH_REGISTRY.get(name))
    for dataset in (*cfg.DATASETS.TESTS, *cfg.DATASETS.NAMES):
        if found is not None:
            break
        if dataset in DATASET_REGISTRY:
            found = _registered(DATASET_REGISTRY.get(dataset))
    return found or DefaultTrainer


def _registered(obj: object) -> type[DefaultTrainer] | None:
    for cls in obj.__mro__ if isinstance(obj, type) else ():
        if cls in _TRAINERS:
            return _TRAINERS[cls]
    return None
