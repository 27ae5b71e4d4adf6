"""Freezing top-level modules (``MODEL.FREEZE_LAYERS`` for ``SOLVER.FREEZE_ITERS`` iterations).

A frozen module's normalisation layers stay in eval mode (running statistics are used and not
updated), as upstream FastReID's LayerFreeze hook does, and by default its parameters stop
training (``requires_grad`` False, so they get no gradient and optimisers skip them).
``model.train()`` keeps frozen modules in eval mode, so an evaluation in the middle of the frozen
period does not undo it.

Under DistributedDataParallel, changing ``requires_grad`` after wrapping is not supported by
DDP; pass ``stop_gradients=False`` there and leave the parameters of ``frozen_parameters()``
out of the optimizer step instead (upstream skips their optimizer param groups).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from torch import nn

__all__ = ["FrozenModulesMixin", "freeze_modules", "unfreeze_modules"]

logger = logging.getLogger(__name__)


class FrozenModulesMixin:
    """Adds ``freeze(names)``, ``unfreeze()`` and a frozen-aware ``train()`` to an ``nn.Module``."""

    def _frozen_state(self) -> dict[str, dict[str, bool]]:
        # name -> {parameter name: requires_grad before freezing}
        if "_frozen_modules" not in self.__dict__:
            self.__dict__["_frozen_modules"] = {}
        return self.__dict__["_frozen_modules"]

    @property
    def frozen_modules(self) -> list[str]:
        return list(self._frozen_state())

    def frozen_parameters(self) -> list:
        """Parameters of the frozen modules."""
        children = dict(self.named_children())  # type: ignore[attr-defined]
        return [p for name in self._frozen_state() for p in children[name].parameters()]

    def freeze(self, names: Iterable[str], stop_gradients: bool = True) -> list[str]:
        """Freeze the named top-level children; returns the names frozen. Unknown names are
        logged and skipped (upstream's behaviour), not fatal."""
        children = dict(self.named_children())  # type: ignore[attr-defined]
        state = self._frozen_state()
        frozen = []
        for name in names:
            if name not in children:
                logger.warning(
                    f"MODEL.FREEZE_LAYERS: {name!r} is not a module of {type(self).__name__} "
                    f"(modules: {', '.join(children)}); skipped"
                )
                continue
            module = children[name]
            if name not in state:
                state[name] = {p_name: p.requires_grad for p_name, p in module.named_parameters()}
            if stop_gradients:
                for p in module.parameters():
                    p.requires_grad_(False)
            module.eval()
            frozen.append(name)
        return frozen

    def unfreeze(self) -> list[str]:
        """Restore every frozen module (trainability as before, train/eval mode as the model's)."""
        children = dict(self.named_children())  # type: ignore[attr-defined]
        state = self._frozen_state()
        names = list(state)
        for name in names:
            module = children[name]
            for p_name, p in module.named_parameters():
                p.requires_grad_(state[name].get(p_name, True))
            module.train(self.training)  # type: ignore[attr-defined]
        state.clear()
        return names

    def train(self, mode: bool = True):
        super().train(mode)  # type: ignore[misc]
        if mode:
            children = dict(self.named_children())  # type: ignore[attr-defined]
            for name in self._frozen_state():
                children[name].eval()
        return self


def _unwrap(model: nn.Module) -> nn.Module:
    return getattr(model, "module", model)  # DistributedDataParallel / DataParallel


def freeze_modules(model: nn.Module, names: Iterable[str], stop_gradients: bool = True) -> list[str]:
    """Freeze the named top-level modules of ``model`` (DDP-wrapped or not)."""
    inner = _unwrap(model)
    if not isinstance(inner, FrozenModulesMixin):
        raise TypeError(f"{type(inner).__name__} does not support freezing (it lacks FrozenModulesMixin)")
    return inner.freeze(names, stop_gradients=stop_gradients)


def unfreeze_modules(model: nn.Module) -> list[str]:
    """Undo ``freeze_modules``; returns the names restored."""
    inner = _unwrap(model)
    if not isinstance(inner, FrozenModulesMixin):
        return []
    return inner.unfreeze()
