"""Random draws from a sample's ``torch.Generator``, shared by the seeded transforms.

Every random parameter of a transform comes from these helpers and the generator the loader
passes (never from the global RNGs, which thread workers share), so a sample's augmentation
depends only on its key.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["uniform", "randint", "chance", "numpy_rng"]


def uniform(g: torch.Generator, low: float, high: float) -> float:
    return low + (high - low) * float(torch.rand((), generator=g))


def randint(g: torch.Generator, low: int, high: int) -> int:
    """A random integer in ``[low, high]`` (both included)."""
    return int(torch.randint(low, high + 1, (), generator=g))


def chance(g: torch.Generator, p: float) -> bool:
    """True with probability ``p`` (one draw from ``g`` whatever ``p`` is, keeping streams aligned)."""
    return float(torch.rand((), generator=g)) < p


def numpy_rng(g: torch.Generator) -> np.random.Generator:
    """A numpy Generator seeded from ``g`` (for Dirichlet / Beta draws torch cannot seed)."""
    return np.random.default_rng(int(torch.randint(0, 2**62, (), generator=g)))
