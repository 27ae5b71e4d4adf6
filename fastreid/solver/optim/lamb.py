"""LAMB (You et al., "Large Batch Optimization for Deep Learning: Training BERT in 76 minutes",
2019): Adam's update scaled per parameter by the trust ratio ``|w| / |update|``; torch has none.
Upstream FastReID's ``fastreid.solver.optim.lamb`` (its defaults, no bias correction, the weight
norm clamped to [0, 10])."""

from __future__ import annotations

import collections
from collections.abc import Iterable
from typing import Any, Callable, Optional

import torch
from torch.optim import Optimizer

__all__ = ["Lamb", "log_lamb_rs"]


def log_lamb_rs(optimizer: Optimizer, event_writer: Any, token_count: int) -> None:
    """Histograms of the last step's weight norms, update norms and trust ratios across
    parameters, written with ``event_writer.add_histogram`` (a TensorBoard ``SummaryWriter``)."""
    results: dict[str, list[float]] = collections.defaultdict(list)
    for group in optimizer.param_groups:
        for p in group["params"]:
            state = optimizer.state[p]
            for key in ("weight_norm", "adam_norm", "trust_ratio"):
                if key in state:
                    results[key].append(float(state[key]))
    for key, values in results.items():
        event_writer.add_histogram(f"lamb/{key}", torch.tensor(values), token_count)


class Lamb(Optimizer):
    """``adam`` True: trust ratio 1 (plain Adam without bias correction), for comparisons."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0,
        adam: bool = False,
    ) -> None:
        if lr < 0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if eps < 0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        for i, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {beta}")
        self.adam = adam
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure: Optional[Callable[[], float]] = None) -> Optional[float]:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("Lamb does not support sparse gradients, use SparseAdam")
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                state["step"] += 1
                exp_avg.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                update = exp_avg / exp_avg_sq.sqrt().add(group["eps"])
                if group["weight_decay"] != 0:
                    update.add_(p, alpha=group["weight_decay"])
                weight_norm = p.pow(2).sum().sqrt().clamp(0, 10)
                adam_norm = update.pow(2).sum().sqrt()
                trust_ratio = 1.0 if weight_norm == 0 or adam_norm == 0 else weight_norm / adam_norm
                state["weight_norm"], state["adam_norm"], state["trust_ratio"] = (
                    weight_norm,
                    adam_norm,
                    trust_ratio,
                )
                if self.adam:
                    trust_ratio = 1.0
                p.add_(update, alpha=-group["lr"] * float(trust_ratio))
        return loss
