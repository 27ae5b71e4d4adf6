"""Seeding and deterministic execution."""

from __future__ import annotations

import os
import random
from typing import Any

import numpy as np
import torch

from fastreid.utils.rng import rng_isolated

__all__ = ["set_seed", "verify_reproducibility", "reproducibility_report"]


def set_seed(seed: int, deterministic: bool = False, benchmark: bool = False) -> dict[str, Any]:
    """Seed python, numpy and torch (CPU and every CUDA device); set cuDNN flags.

    A negative seed draws a fresh one (logged by the caller through the returned dict).
    ``deterministic`` turns on ``torch.use_deterministic_algorithms`` (ops without a deterministic
    implementation warn instead of failing) and the cuBLAS workspace setting it needs; it also
    turns cuDNN benchmarking off, since benchmarking picks algorithms by timing.
    """
    if seed is None or seed < 0:
        seed = int.from_bytes(os.urandom(4), "little") & 0x7FFFFFFF
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # seeds every CUDA device too
    if deterministic:
        benchmark = False
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.backends.cudnn.deterministic = bool(deterministic)
    torch.backends.cudnn.benchmark = bool(benchmark)
    torch.use_deterministic_algorithms(bool(deterministic), warn_only=True)
    return {
        "seed": seed,
        "deterministic": bool(deterministic),
        "cudnn_benchmark": bool(benchmark),
        "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG", ""),
    }


def _small_run(seed: int, device: torch.device) -> list[torch.Tensor]:
    set_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.BatchNorm2d(8),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(8, 4),
    ).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    outputs = []
    for _ in range(3):
        x = torch.randn(4, 3, 16, 8, device=device)
        y = torch.randint(0, 4, (4,), device=device)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        outputs.append(loss.detach().cpu())
    outputs.extend(p.detach().cpu() for p in model.parameters())
    return outputs


def reproducibility_report(seed: int = 0, device: str | torch.device = "cpu") -> dict[str, Any]:
    """Train a tiny network twice with the same seed and report whether the results matched
    bit for bit (``matched``) and the largest difference seen (``max_abs_diff``). The caller's
    random state is restored afterwards."""
    device = torch.device(device)
    with rng_isolated():
        first = _small_run(seed, device)
        second = _small_run(seed, device)
    diff = max(float((a - b).abs().max()) for a, b in zip(first, second))
    return {"matched": diff == 0.0, "max_abs_diff": diff, "device": str(device), "seed": seed}


def verify_reproducibility(
    seed: int = 0, device: str | torch.device = "cpu", verbose: bool = False, details: bool = False
) -> bool | dict[str, Any]:
    """True when two tiny training runs with the same seed match bit for bit.

    A bool, so that ``if verify_reproducibility():`` means what it says (a non-empty dict is
    always true). ``verbose`` prints the outcome; ``details=True`` returns the dict of
    :func:`reproducibility_report` instead.
    """
    report = reproducibility_report(seed, device)
    if verbose:
        outcome = (
            "reproducible"
            if report["matched"]
            else f"NOT reproducible (max |diff| {report['max_abs_diff']:.3g})"
        )
        print(f"verify_reproducibility: two runs with seed {seed} on {report['device']}: {outcome}")
    return report if details else bool(report["matched"])
