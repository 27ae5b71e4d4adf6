"""Optional speed settings applied to a built model: ``MODEL.COMPILE`` and ``MODEL.CHANNELS_LAST``.

Both are off by default: neither has been measured as a win for this project's models on the CPUs it
is tested on (``torch.compile`` spends tens of seconds compiling before the first step; channels-last
memory helps convolutions on CUDA tensor cores, not on CPUs), so a user turns them on after measuring
on their own hardware (``benchmarks/training.py``).

``MODEL.COMPILE`` compiles the module in place (``nn.Module.compile``), so state-dict keys stay the same
(no ``_orig_mod.`` prefix) and checkpoints remain compatible with upstream and with uncompiled runs.
"""

from __future__ import annotations

import logging

import torch
from torch import nn

__all__ = ["apply_model_options"]

logger = logging.getLogger(__name__)


def apply_model_options(cfg, model: nn.Module) -> nn.Module:
    """Apply ``MODEL.CHANNELS_LAST`` (CUDA only) and ``MODEL.COMPILE`` to ``model``; returns it."""
    m = cfg.MODEL
    if m.get("CHANNELS_LAST", False):
        device = next(model.parameters()).device
        if device.type == "cuda":
            model.to(memory_format=torch.channels_last)
            logger.info("MODEL.CHANNELS_LAST: parameters in channels-last memory format")
        else:
            logger.info(
                "MODEL.CHANNELS_LAST is ignored on %s: it only helps convolutions on CUDA", device.type
            )
    if m.get("COMPILE", False):
        mode = m.get("COMPILE_MODE", "default") or "default"
        backend = m.get("COMPILE_BACKEND", "inductor") or "inductor"
        model.compile(backend=backend, mode=None if backend != "inductor" else mode)
        logger.info(
            "MODEL.COMPILE: forward compiled on first use (torch.compile backend %r, mode %r)", backend, mode
        )
    return model
