"""Meta-architecture registry and ``build_model``."""

from __future__ import annotations

import logging

import torch
from torch import nn

from fastreid.config import ConfigError
from fastreid.utils.device import resolve_device
from fastreid.utils.registry import Registry

from ..summary import log_model_summary

__all__ = ["META_ARCH_REGISTRY", "UNSUPPORTED_META_ARCHS", "build_model", "resolve_device"]

logger = logging.getLogger(__name__)

META_ARCH_REGISTRY = Registry("META_ARCH")
META_ARCH_REGISTRY.__doc__ = """
Registry for meta-architectures: whole models (backbone + heads + losses) built from the cfg.
"""

# Upstream FastReID meta-architectures that fastreid does not build yet.
UNSUPPORTED_META_ARCHS: tuple[str, ...] = ()


def build_model(cfg, *, log_summary: bool = True) -> nn.Module:
    """Build ``cfg.MODEL.META_ARCHITECTURE``, move it to ``cfg.MODEL.DEVICE`` and log a summary
    (parameters, FLOPs of one ``INPUT.SIZE_TEST`` image) unless ``log_summary`` is False."""
    name = cfg.MODEL.META_ARCHITECTURE
    supported = ", ".join(sorted(n for n, _ in META_ARCH_REGISTRY))
    if name in UNSUPPORTED_META_ARCHS:
        raise ConfigError(
            f"MODEL.META_ARCHITECTURE {name!r} (an upstream FastReID model) is not supported "
            f"yet; supported: {supported}"
        )
    if name not in META_ARCH_REGISTRY:
        raise ConfigError(f"MODEL.META_ARCHITECTURE {name!r} is unknown; supported: {supported}")
    device = torch.device(resolve_device(cfg.MODEL.DEVICE))
    model = META_ARCH_REGISTRY.get(name)(cfg)
    model.to(device)
    if log_summary:
        log_model_summary(model, cfg, logger)
    return model
