"""Meta-architectures. Importing registers them."""

from .baseline import SUPPORTED_LOSSES, Baseline
from .build import META_ARCH_REGISTRY, UNSUPPORTED_META_ARCHS, build_model, resolve_device
from .mgn import MGN

__all__ = ["Baseline", "MGN", "SUPPORTED_LOSSES", "META_ARCH_REGISTRY", "UNSUPPORTED_META_ARCHS", "build_model",
           "resolve_device"]
