"""Upstream's misspelt module path, kept for users' imports; the code lives in :mod:`.cross_entropy_loss`."""

from .cross_entropy_loss import *  # noqa: F403
from .cross_entropy_loss import __all__ as __all__
