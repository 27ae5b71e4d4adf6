"""Meta-architectures. Importing registers them."""

from .baseline import SUPPORTED_LOSSES, Baseline
from .build import META_ARCH_REGISTRY, UNSUPPORTED_META_ARCHS, build_model, resolve_device
from .distiller import Distiller
from .mgn import MGN
from .moco import MoCo

__all__ = [
    "Baseline",
    "MGN",
    "MoCo",
    "Distiller",
    "SUPPORTED_LOSSES",
    "META_ARCH_REGISTRY",
    "UNSUPPORTED_META_ARCHS",
    "build_model",
    "resolve_device",
]
