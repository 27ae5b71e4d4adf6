"""Backbone registry: ``MODEL.BACKBONE.NAME`` names a function ``cfg -> nn.Module``."""

from __future__ import annotations

import functools
from typing import Callable

from torch import nn

from fastreid.config import ConfigError
from fastreid.layers import get_norm
from fastreid.utils.registry import Registry

__all__ = ["BACKBONE_REGISTRY", "build_backbone", "UNSUPPORTED_BACKBONES", "backbone_norm"]

BACKBONE_REGISTRY = Registry("BACKBONE")
BACKBONE_REGISTRY.__doc__ = """
Registry for backbones: feature extractors mapping N x 3 x H x W images to N x C x h x w maps.
A registered function takes the cfg and returns an ``nn.Module`` whose ``out_channels`` attribute
is C (it must equal ``MODEL.BACKBONE.FEAT_DIM``).
"""

# Backbones that upstream FastReID offers and fastreid does not build yet: none any more (every
# name upstream registers is built here); kept so a name can be listed while its port is under way.
UNSUPPORTED_BACKBONES: tuple[str, ...] = ()


def backbone_norm(cfg) -> Callable[..., nn.Module]:
    """``MODEL.BACKBONE.NORM`` as a factory ``channels -> norm layer`` that also carries
    ``NORM_SPLIT`` (GhostBN's sub-batches), for backbones that pass one norm spec everywhere."""
    return functools.partial(get_norm, cfg.MODEL.BACKBONE.NORM, num_splits=cfg.MODEL.BACKBONE.NORM_SPLIT)


def supported_backbones() -> list[str]:
    return sorted(name for name, _ in BACKBONE_REGISTRY)


def build_backbone(cfg) -> nn.Module:
    """Build the backbone named by ``cfg.MODEL.BACKBONE.NAME``."""
    name = cfg.MODEL.BACKBONE.NAME
    supported = ", ".join(supported_backbones())
    if name in UNSUPPORTED_BACKBONES:
        raise ConfigError(
            f"MODEL.BACKBONE.NAME {name!r} (an upstream FastReID backbone) is not supported yet; "
            f"supported backbones: {supported}"
        )
    if name not in BACKBONE_REGISTRY:
        raise ConfigError(f"MODEL.BACKBONE.NAME {name!r} is unknown; supported backbones: {supported}")
    return BACKBONE_REGISTRY.get(name)(cfg)
