"""Registries map names in configs to the classes and functions that build them (fvcore's)."""

from fvcore.common.registry import Registry

__all__ = ["Registry"]
