"""Optional dependencies: the pip extras of this package, and the one error that names the missing
one (``pip install fastreid[tune]``) instead of an ImportError traceback."""

from __future__ import annotations

import importlib
from types import ModuleType

from fastreid.utils.errors import UserError

__all__ = ["EXTRAS", "MissingExtraError", "require"]

# extra -> what it enables (the packages are declared in pyproject.toml's optional-dependencies)
EXTRAS = {
    "deploy": "ONNX export, int8 quantization and ONNX Runtime inference",
    "openvino": "the OpenVINO feature backend",
    "tune": "hyper-parameter search on Ray Tune",
    "serve": "the local search page (FastAPI)",
    "serve-ray": "the search page as replicas on Ray Serve (fastreid-serve --replicas)",
    "tensorboard": "TensorBoard event files",
    "cuhk03": "extracting CUHK03 from its .mat files",
    "uda": "clustering the target's images for unsupervised / domain-adaptive re-ID (scikit-learn's DBSCAN)",
}


class MissingExtraError(UserError, ImportError):
    """An optional dependency is not installed; the message names the extra that provides it."""


def require(module: str, purpose: str, extra: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingExtraError` saying how to install ``extra``."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingExtraError(
            f"{purpose} needs the '{module.split('.')[0]}' package of the '{extra}' extra: "
            f'pip install "fastreid[{extra}]" (in a checkout: pip install -e ".[{extra}]")'
        ) from e
