"""Reference data taken from upstream FastReID's released code (see data/upstream/*.json).

``data/make_upstream_reference.py`` builds upstream's models (its code, not ours) for a list of
configs, writes each state dict's key names and shapes, fills the tensors with
``deterministic_state`` and records the eval features (and training losses) for a fixed input.
The tests fill our model with the same function, so both run on the same weights and input.

This module imports only torch, so the generator can use it under upstream's ``PYTHONPATH``.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping, Sequence

import torch

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "upstream")
NUM_CLASSES = 16
BATCH_TARGETS = [0, 0, 1, 1]


def deterministic_state(shapes: Mapping[str, Sequence[int]], seed: int = 0) -> dict[str, torch.Tensor]:
    """Tensors for ``key -> shape``, a function of the key's rank in sorted order and its name only.

    Weights with a fan-in get ``N(0, 1 / fan_in)`` (so deep nets neither vanish nor explode),
    norm weights ``1 + 0.1 N``, running variances ``U(0.5, 1.5)``, GeM ``p`` 3, the rest ``0.1 N``.
    """
    state = {}
    for rank, key in enumerate(sorted(shapes)):
        shape = tuple(shapes[key])
        g = torch.Generator().manual_seed(seed * 100_003 + rank)
        leaf = key.rsplit(".", 1)[-1]
        if leaf == "num_batches_tracked":
            state[key] = torch.tensor(0, dtype=torch.long)
        elif leaf in ("queue_label", "queue_ptr"):
            state[key] = torch.zeros(shape, dtype=torch.long)
        elif leaf == "running_var":
            state[key] = torch.rand(shape, generator=g) + 0.5
        elif key.endswith("pool_layer.p"):
            state[key] = torch.full(shape, 3.0)
        elif len(shape) >= 2 and leaf == "weight":
            fan_in = math.prod(shape[1:])
            state[key] = torch.randn(shape, generator=g) / math.sqrt(fan_in)
        elif leaf == "weight":
            state[key] = 1 + 0.1 * torch.randn(shape, generator=g)
        else:
            state[key] = 0.1 * torch.randn(shape, generator=g)
    return state


def calibrate_norms(model: torch.nn.Module, run: Callable[[], object]) -> None:
    """Set every batch norm's running statistics to those of one training-mode pass ``run()``.

    Random running statistics make deep nets forget their input (each norm shrinks or blows up the
    signal), so eval features would hardly depend on the image; calibrated ones keep it.
    """
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    momenta = [m.momentum for m in norms]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # cumulative average: after one pass, the batch statistics
    model.train()
    with torch.no_grad():
        run()
    for m, momentum in zip(norms, momenta):
        m.momentum = momentum


def reference_images(height: int, width: int, n: int = 4, seed: int = 2024) -> torch.Tensor:
    """``n`` uint8 images: coarse random blobs (smooth, so deep nets keep them apart) plus noise."""
    g = torch.Generator().manual_seed(seed)
    coarse = torch.rand(n, 3, max(height // 8, 1), max(width // 8, 1), generator=g) * 255
    smooth = torch.nn.functional.interpolate(coarse, size=(height, width), mode="bilinear", align_corners=False)
    noise = torch.randn(n, 3, height, width, generator=g) * 10
    return (smooth + noise).clamp(0, 255).round().to(torch.uint8)


def load_reference(name: str) -> dict:
    """``{"keys": {key: shape}, "source": ..., "config": ..., "overrides": [...], ...}`` plus, when
    recorded, ``"features"`` and ``"losses"`` (tensors)."""
    with open(os.path.join(DATA_DIR, f"{name}.json")) as f:
        ref = json.load(f)
    pt = os.path.join(DATA_DIR, f"{name}.pt")
    if os.path.exists(pt):
        ref.update(torch.load(pt, map_location="cpu", weights_only=True))
    return ref
