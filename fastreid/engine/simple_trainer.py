"""The trainers of one iteration: ``SimpleTrainer`` (next batch, losses, backward, optimizer step)
and ``AMPTrainer`` (the same step under autocast, through a GradScaler on CUDA). Both share one
backward-and-step; the loop around them is :class:`~fastreid.engine.trainer_base.TrainerBase`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Iterable, Mapping
from typing import Any, Callable, Optional, cast

import torch
from torch import nn

from fastreid.utils import comm
from fastreid.utils.errors import UserError
from fastreid.utils.events import get_event_storage

from .trainer_base import TrainerBase

__all__ = ["AMPTrainer", "NonFiniteLossError", "SimpleTrainer"]

# The name log lines have always carried (upstream's module); fastreid.engine.train_loop re-exports.
logger = logging.getLogger("fastreid.engine.train_loop")


class NonFiniteLossError(UserError, FloatingPointError):
    """The loss became NaN or infinite; the message names the iteration and the loss terms."""


def _model_device(model: nn.Module) -> torch.device:
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


class SimpleTrainer(TrainerBase):
    """One iteration: next batch, ``loss_dict = model(batch)``, check the losses are finite,
    backward, optional gradient clipping, optimizer step.

    ``frozen_parameters`` (set by the layer-freeze hook) have their gradients dropped before
    the step, so the optimizer leaves them (and their weight decay and momentum) untouched.
    """

    def __init__(
        self,
        model: nn.Module,
        data_loader: Iterable,
        optimizer: torch.optim.Optimizer,
        grad_clipper: Optional[Callable[[Iterable[torch.Tensor]], None]] = None,
    ) -> None:
        super().__init__()
        model.train()
        self.model = model
        self.data_loader = data_loader
        self._data_loader_iter: Optional[Any] = None
        self.optimizer = optimizer
        self.grad_clipper = grad_clipper
        self.grad_scaler: Optional[Any] = None
        self.frozen_parameters: list[torch.Tensor] = []
        self.device = _model_device(model)

    @property
    def data_loader_iter(self):
        if self._data_loader_iter is None:
            self._data_loader_iter = iter(self.data_loader)
        return self._data_loader_iter

    def reset_data_loader(self, data_loader: Iterable) -> None:
        """Use a new loader (e.g. one positioned at the resumed iteration)."""
        self.data_loader = data_loader
        self._data_loader_iter = None

    def _next_batch(self) -> tuple[Any, float]:
        start = time.perf_counter()
        # the loader moves batches to the device (DataLoaderX's CUDA prefetch); the model
        # accepts a batch already there or still on the CPU
        data = next(self.data_loader_iter)
        return data, time.perf_counter() - start

    def _params(self) -> list[torch.Tensor]:
        return [p for g in self.optimizer.param_groups for p in g["params"] if p.grad is not None]

    def _drop_frozen_grads(self) -> None:
        for p in self.frozen_parameters:
            p.grad = None

    def run_step(self) -> None:
        assert self.model.training, f"[{type(self).__name__}] the model was left in eval mode"
        data, data_time = self._next_batch()
        with self._autocast():
            loss_dict = self.model(data)
            losses = self._total_loss(loss_dict)
        self._backward_and_step(losses)
        self._write_metrics(loss_dict, data_time)

    def _autocast(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def _backward_and_step(self, losses: torch.Tensor) -> None:
        """Backward, frozen gradients dropped, optional clipping, optimizer step (through the
        GradScaler when there is one)."""
        self.optimizer.zero_grad(set_to_none=True)
        scaler = self.grad_scaler
        (losses if scaler is None else scaler.scale(losses)).backward()
        self._drop_frozen_grads()
        if self.grad_clipper is not None:
            if scaler is not None:
                scaler.unscale_(self.optimizer)
            self.grad_clipper(self._params())
        if scaler is None:
            self.optimizer.step()
        else:
            scaler.step(self.optimizer)
            scaler.update()

    def _total_loss(self, loss_dict: Any) -> torch.Tensor:
        if isinstance(loss_dict, torch.Tensor):
            loss_dict = {"total_loss": loss_dict}
        if not isinstance(loss_dict, Mapping) or not loss_dict:
            raise TypeError(
                f"In training mode the model must return a non-empty dict of losses, got {type(loss_dict).__name__}"
            )
        self._last_loss_dict = {k: v.detach() for k, v in loss_dict.items()}
        losses = cast(torch.Tensor, sum(loss_dict.values()))  # non-empty, so a tensor
        self._check_finite(self._last_loss_dict)
        return losses

    def _check_finite(self, loss_dict: dict[str, torch.Tensor]) -> None:
        """Every rank learns whether any rank's loss is not finite, so all stop together."""
        reduced = comm.reduce_dict({k: v.float() for k, v in loss_dict.items()}, average=True)
        self._reduced_losses = {k: float(v) for k, v in reduced.items()}
        values = list(self._reduced_losses.values())
        if not all(math.isfinite(v) for v in values) or not math.isfinite(sum(values)):
            terms = ", ".join(f"{k}={v}" for k, v in self._reduced_losses.items())
            raise NonFiniteLossError(
                f"Loss became infinite or NaN at iteration {self.iter} (epoch {self.epoch}): {terms}. "
                "Training stopped; lower SOLVER.BASE_LR, enable SOLVER.CLIP_GRADIENTS, or check the data."
            )

    def _write_metrics(self, loss_dict: dict[str, torch.Tensor], data_time: float) -> None:
        storage = get_event_storage()
        storage.put_scalar("data_time", data_time)
        reduced = self._reduced_losses
        storage.put_scalar("total_loss", sum(reduced.values()))
        for k, v in reduced.items():
            if k != "total_loss":
                storage.put_scalar(k, v)


class AMPTrainer(SimpleTrainer):
    """Mixed precision: float16 autocast + GradScaler on CUDA, bfloat16 autocast on the CPU
    (bfloat16 has float32's range, so no loss scaling is needed there)."""

    def __init__(
        self,
        model: nn.Module,
        data_loader: Iterable,
        optimizer: torch.optim.Optimizer,
        grad_clipper: Optional[Callable[[Iterable[torch.Tensor]], None]] = None,
        grad_scaler: Optional[Any] = None,
    ) -> None:
        super().__init__(model, data_loader, optimizer, grad_clipper)
        if self.device.type == "cuda":
            self.amp_dtype = torch.float16
            self.grad_scaler = grad_scaler or torch.amp.GradScaler("cuda")
        else:
            self.amp_dtype = torch.bfloat16
            self.grad_scaler = None
        logger.info(f"Mixed precision on {self.device.type}: autocast to {self.amp_dtype}")

    def _autocast(self) -> contextlib.AbstractContextManager:
        return torch.autocast(device_type=self.device.type, dtype=self.amp_dtype)
