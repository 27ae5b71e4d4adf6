"""Head registry: ``MODEL.HEADS.NAME`` names a class built from the cfg."""

from __future__ import annotations

from torch import nn

from fastreid.config import ConfigError
from fastreid.utils.registry import Registry

__all__ = ["HEADS_REGISTRY", "REID_HEADS_REGISTRY", "build_heads"]

HEADS_REGISTRY = Registry("HEADS")
HEADS_REGISTRY.__doc__ = """
Registry for heads: modules mapping backbone feature maps to features (eval) or to the
outputs the losses need (training).
"""
REID_HEADS_REGISTRY = HEADS_REGISTRY  # upstream's name


def build_heads(cfg) -> nn.Module:
    """Build the head named by ``cfg.MODEL.HEADS.NAME``."""
    name = cfg.MODEL.HEADS.NAME
    if name not in HEADS_REGISTRY:
        supported = ", ".join(sorted(n for n, _ in HEADS_REGISTRY))
        raise ConfigError(f"MODEL.HEADS.NAME {name!r} is not supported; supported heads: {supported}")
    return HEADS_REGISTRY.get(name)(cfg)
