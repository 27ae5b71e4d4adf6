"""Saving and restoring the global random number generators (python, numpy, torch CPU and CUDA).

One place for it: checkpoints store :func:`capture_rng_states` for exact resume, and
:func:`rng_isolated` runs a block (an evaluation, precise BN, a reproducibility check) without
disturbing the training run's random streams.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

import numpy as np
import torch

__all__ = ["capture_rng_states", "restore_rng_states", "rng_isolated"]


def capture_rng_states() -> dict[str, Any]:
    """Python, numpy and torch (CPU and CUDA) RNG states, in a form ``torch.load`` reads with
    ``weights_only=True`` (no pickled numpy objects)."""
    # legacy=True (the default) gives the tuple form
    name, keys, pos, has_gauss, cached = cast(
        "tuple[str, np.ndarray, int, int, float]", np.random.get_state()
    )
    states: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": (name, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def restore_rng_states(states: dict[str, Any]) -> None:
    """Inverse of :func:`capture_rng_states`."""
    if "python" in states:
        version, internal, gauss = states["python"]
        random.setstate((version, tuple(internal), gauss))
    if "numpy" in states:
        name, keys, pos, has_gauss, cached = states["numpy"]
        keys = keys.numpy() if isinstance(keys, torch.Tensor) else np.asarray(keys)
        np.random.set_state((name, keys.astype(np.uint32), pos, has_gauss, cached))
    if "torch" in states:
        torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        cuda_states = states["cuda"]
        if len(cuda_states) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(cuda_states)


@contextmanager
def rng_isolated() -> Iterator[None]:
    """Run a block without disturbing the global python / numpy / torch RNG streams.

    Evaluation and precise BN build loaders (whose iterators draw a seed from torch's global RNG);
    isolating them keeps training randomness independent of how often they run, which exact
    resume relies on.
    """
    states = capture_rng_states()
    try:
        yield
    finally:
        restore_rng_states(states)
