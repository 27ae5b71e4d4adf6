"""Small engine scenarios that run unchanged on upstream FastReID's engine and on this package's.

Each function takes the modules it exercises (``train_loop``, ``hooks``, ``checkpoint``) as
arguments, so ``data/make_upstream_reference.py`` runs them on upstream's code to record
``data/upstream_engine.json`` and ``test_upstream_engine_parity.py`` runs them on ours. Models,
data and optimizers are float64 and drawn with numpy's ``Generator`` (the same on every CPU).
Nothing here imports ``fastreid``.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch import nn

ITERS_PER_EPOCH = 4
MAX_EPOCH = 5


def _batches(seed: int, count: int = 6, size: int = 8) -> list[dict[str, torch.Tensor]]:
    rng = np.random.default_rng(seed)
    return [
        {"x": torch.from_numpy(rng.normal(size=(size, 4))), "y": torch.from_numpy(rng.normal(size=(size, 2)))}
        for _ in range(count)
    ]


class TinyRegressor(nn.Module):
    """A float64 linear layer with two losses; records the loss values it returns."""

    def __init__(self, seed: int = 1) -> None:
        super().__init__()
        rng = np.random.default_rng(seed)
        self.linear = nn.Linear(4, 2).double()
        with torch.no_grad():
            self.linear.weight.copy_(torch.from_numpy(rng.normal(size=(2, 4))))
            self.linear.bias.copy_(torch.from_numpy(rng.normal(size=2)))
        self.losses: list[float] = []

    def forward(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        out = self.linear(batch["x"])
        losses = {
            "loss_mse": ((out - batch["y"]) ** 2).mean(),
            "loss_l1": 0.5 * (out - batch["y"]).abs().mean(),
        }
        self.losses.append(float(sum(v.detach() for v in losses.values())))
        return losses


def training_schedule(train_loop: Any, hooks: Any, swa: bool) -> dict[str, Any]:
    """``SimpleTrainer`` for 5 epochs of 4 iterations with the ``LRScheduler`` hook (linear
    warmup over exactly 2 epochs, a multi-step schedule delayed by 1 epoch) and, with ``swa``, the
    ``SWA`` hook (start at iteration 9, every 3 iterations, cosine restarts). The LR each
    iteration trains with, the losses and the final weights."""
    model = TinyRegressor()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    schedulers = {
        "warmup_sched": torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.25, total_iters=8),
        "lr_sched": torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[2, 3], gamma=0.5),
    }
    trainer = train_loop.SimpleTrainer(model, itertools.cycle(_batches(seed=2)), optimizer, None)
    # what upstream's DefaultTrainer sets and its hooks read
    trainer.warmup_iters, trainer.delay_epochs = 8, 1
    trainer.grad_scaler = None
    trainer.max_iter = MAX_EPOCH * ITERS_PER_EPOCH
    lrs: list[float] = []
    registered = [hooks.LRScheduler(optimizer, schedulers)]
    if swa:
        registered.append(hooks.SWA(9, 3, 0.5, 0.001, lr_sched=True))
    registered.append(hooks.CallbackHook(before_step=lambda t: lrs.append(t.optimizer.param_groups[0]["lr"])))
    trainer.register_hooks(registered)
    trainer.train(0, MAX_EPOCH, ITERS_PER_EPOCH)
    return {
        "lrs": lrs,
        "losses": model.losses,
        "weight": model.linear.weight.detach().tolist(),
        "bias": model.linear.bias.detach().tolist(),
    }


def hook_order(train_loop: Any, hooks: Any) -> list[list[Any]]:
    """The hook calls (stage, the epoch but before training, and the iteration for steps) of
    epochs 1 and 2 of 2 iterations each, through ``CallbackHook``."""

    class Loop(train_loop.TrainerBase):
        def run_step(self) -> None:
            pass

    calls: list[list[Any]] = []

    def recorder(stage: str, with_epoch: bool = True, with_iter: bool = False):
        # upstream's loop has no epoch before the first one
        return lambda t: calls.append(
            [stage] + ([t.epoch] if with_epoch else []) + ([t.iter] if with_iter else [])
        )

    loop = Loop()
    loop.register_hooks(
        [
            hooks.CallbackHook(
                before_train=recorder("before_train", with_epoch=False),
                after_train=recorder("after_train"),
                before_epoch=recorder("before_epoch"),
                after_epoch=recorder("after_epoch"),
                before_step=recorder("before_step", with_iter=True),
                after_step=recorder("after_step", with_iter=True),
            )
        ]
    )
    loop.train(1, 3, 2)
    return calls


def evaluation_epochs(train_loop: Any, hooks: Any, max_epoch: int, period: int) -> list[int]:
    """The epochs after which ``EvalHook(period, ...)`` evaluates in a run of ``max_epoch``
    epochs of 2 iterations."""

    class Loop(train_loop.TrainerBase):
        def run_step(self) -> None:
            pass

    loop = Loop()
    loop.max_epoch = max_epoch  # upstream's DefaultTrainer sets it; its EvalHook reads it
    evaluated: list[int] = []

    def evaluate() -> dict[str, float]:
        evaluated.append(loop.epoch)
        return {"metric": 1.0}

    loop.register_hooks([hooks.EvalHook(period, evaluate)])
    loop.train(0, max_epoch, 2)
    return evaluated


class TinyBatchNorm(nn.Module):
    """Float64 linear + BatchNorm over ``batch["x"]``; records the ``targets`` it is given."""

    def __init__(self, seed: int = 4) -> None:
        super().__init__()
        rng = np.random.default_rng(seed)
        self.linear = nn.Linear(3, 4).double()
        self.bn = nn.BatchNorm1d(4).double()
        with torch.no_grad():
            self.linear.weight.copy_(torch.from_numpy(rng.normal(size=(4, 3))))
            self.linear.bias.copy_(torch.from_numpy(rng.normal(size=4)))
        self.targets_seen: list[list[int]] = []

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        self.targets_seen.append(batch["targets"].tolist())
        return self.bn(self.linear(batch["x"]))


def precise_bn_statistics(hooks: Any) -> dict[str, list]:
    """``PreciseBN(model, data_loader, num_iter).update_stats()`` without a trainer: the running
    statistics it leaves and the targets the model saw (marked as a precise-BN pass)."""
    rng = np.random.default_rng(5)
    model = TinyBatchNorm()
    model.train()
    loader = [
        {"x": torch.from_numpy(rng.normal(loc=2.0, size=(6, 3))), "targets": torch.arange(6)}
        for _ in range(5)
    ]
    hooks.PreciseBN(model, loader, 4).update_stats()
    with torch.no_grad():
        features = torch.cat([model.linear(batch["x"]) for batch in loader[:4]])
    return {
        "running_mean": model.bn.running_mean.tolist(),
        "running_var": model.bn.running_var.tolist(),
        "targets_seen": model.targets_seen,
        "population_var": features.var(dim=0, unbiased=False).tolist(),
        "mean_of_batch_vars": torch.stack([f.var(dim=0) for f in features.split(6)]).mean(0).tolist(),
    }


class RecordingCheckpointer:
    """Records the ``save`` calls it gets instead of writing files."""

    save_dir = "unused"

    def __init__(self) -> None:
        self.saved: list[list[Any]] = []

    def save(self, name: str, **kwargs: Any) -> None:
        self.saved.append([name, {k: kwargs[k] for k in sorted(kwargs)}])


def periodic_saves(checkpoint: Any, period: int, max_epoch: int, metrics: list[float]) -> list[list[Any]]:
    """What ``PeriodicCheckpointer(checkpointer, period, max_epoch).step(epoch, metric=...)``
    saves over a run."""
    recorder = RecordingCheckpointer()
    periodic = checkpoint.PeriodicCheckpointer(recorder, period, max_epoch)
    for epoch, metric in enumerate(metrics):
        periodic.step(epoch, metric=metric)
    return recorder.saved


KEY_LISTS = [
    ["heads.weight"],
    ["backbone.conv1.weight", "backbone.bn1.weight", "backbone.bn1.bias", "heads.weight"],
    ["a.b.c.weight", "x", "a.b.c.bias", "a.d.running_mean", "x.y"],
]


@contextlib.contextmanager
def termcolor_mode(mode: str) -> Iterator[None]:
    """termcolor's colours forced on (``"colour"``) or off (``"plain"``) for the block."""
    from termcolor import termcolor

    saved = {k: os.environ.pop(k, None) for k in ("FORCE_COLOR", "NO_COLOR", "ANSI_COLORS_DISABLED")}
    os.environ["FORCE_COLOR" if mode == "colour" else "NO_COLOR"] = "1"
    clear = getattr(getattr(termcolor, "can_colorize", None), "cache_clear", None)
    if clear is not None:
        clear()  # termcolor >= 2.4 caches its decision
    try:
        yield
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None)
            if v is not None:
                os.environ[k] = v
        if clear is not None:
            clear()


def load_messages(checkpoint: Any) -> list[list[str]]:
    """``get_missing_parameters_message`` and ``get_unexpected_parameters_message`` of
    :data:`KEY_LISTS`."""
    return [
        [checkpoint.get_missing_parameters_message(keys), checkpoint.get_unexpected_parameters_message(keys)]
        for keys in KEY_LISTS
    ]


def to_json(value: Any) -> Any:
    """A checkpoint's content as JSON: tensors as ``{"tensor": values, "dtype": name}``, dict keys
    as ``[key, value]`` pairs (optimizer states are keyed by int)."""
    if isinstance(value, torch.Tensor):
        return {"tensor": value.tolist(), "dtype": str(value.dtype).replace("torch.", "")}
    if isinstance(value, dict):
        return {"pairs": [[k, to_json(v)] for k, v in value.items()]}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    return value


def from_json(value: Any) -> Any:
    """The inverse of :func:`to_json`."""
    if isinstance(value, dict) and "tensor" in value:
        return torch.tensor(value["tensor"], dtype=getattr(torch, value["dtype"]))
    if isinstance(value, dict):
        return {k: from_json(v) for k, v in value["pairs"]}
    if isinstance(value, list):
        return [from_json(v) for v in value]
    return value
