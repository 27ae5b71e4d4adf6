"""Meta-architecture registry and ``build_model``."""

from __future__ import annotations

import logging

import torch
from torch import nn

from fastreid.config import ConfigError
from fastreid.utils.registry import Registry

__all__ = ["META_ARCH_REGISTRY", "UNSUPPORTED_META_ARCHS", "build_model", "resolve_device"]

logger = logging.getLogger(__name__)

META_ARCH_REGISTRY = Registry("META_ARCH")
META_ARCH_REGISTRY.__doc__ = """
Registry for meta-architectures: whole models (backbone + heads + losses) built from the cfg.
"""

# Upstream FastReID meta-architectures that fastreid does not build yet.
UNSUPPORTED_META_ARCHS: tuple[str, ...] = ()


def resolve_device(name: str) -> torch.device:
    """``MODEL.DEVICE`` as a torch.device, or a clear error when it does not exist here."""
    try:
        device = torch.device(name)
    except RuntimeError as e:
        raise ConfigError(f"MODEL.DEVICE {name!r} is not a valid device ({e})") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"MODEL.DEVICE is {name!r} but CUDA is not available on this machine; "
                              "set MODEL.DEVICE cpu (the trainer does so automatically)")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ConfigError(f"MODEL.DEVICE {name!r}: only {torch.cuda.device_count()} CUDA device(s) here")
    return device


def build_model(cfg, *, log_summary: bool = True) -> nn.Module:
    """Build ``cfg.MODEL.META_ARCHITECTURE``, move it to ``cfg.MODEL.DEVICE`` and log a summary
    (parameters, FLOPs of one ``INPUT.SIZE_TEST`` image) unless ``log_summary`` is False."""
    name = cfg.MODEL.META_ARCHITECTURE
    supported = ", ".join(sorted(n for n, _ in META_ARCH_REGISTRY))
    if name in UNSUPPORTED_META_ARCHS:
        raise ConfigError(f"MODEL.META_ARCHITECTURE {name!r} (an upstream FastReID model) is not supported "
                          f"yet; supported: {supported}")
    if name not in META_ARCH_REGISTRY:
        raise ConfigError(f"MODEL.META_ARCHITECTURE {name!r} is unknown; supported: {supported}")
    device = resolve_device(cfg.MODEL.DEVICE)
    model = META_ARCH_REGISTRY.get(name)(cfg)
    model.to(device)
    if log_summary:
        from ..summary import log_model_summary

        log_model_summary(model, cfg, logger)
    return model
