"""The training loop: a trainer that runs iterations and calls hooks around them.

Iterations are counted from 0 to ``max_iter - 1``; epoch ``e`` holds iterations
``[e * iters_per_epoch, (e + 1) * iters_per_epoch)``. Hooks see, in this order:
``before_train``, then for each iteration ``before_epoch`` (first iteration of an epoch only),
``before_step``, ``after_step``, ``after_epoch`` (last iteration of an epoch only), and finally
``after_train`` (also after an error, so files get closed; hooks check whether training
finished before doing end-of-training work).
"""

from __future__ import annotations

import logging
import math
import time
import weakref
from collections.abc import Iterable, Mapping
from typing import Any, Callable, Optional

import torch
from torch import nn

from fastreid.utils import comm
from fastreid.utils.errors import UserError
from fastreid.utils.events import EventStorage, get_event_storage

__all__ = ["AMPTrainer", "HookBase", "NonFiniteLossError", "SimpleTrainer", "TrainerBase"]

logger = logging.getLogger(__name__)


class NonFiniteLossError(UserError, FloatingPointError):
    """The loss became NaN or infinite; the message names the iteration and the loss terms."""


class HookBase:
    """Base class of training hooks. ``self.trainer`` is set (as a weak reference) on registration."""

    trainer: TrainerBase

    def before_train(self) -> None:
        pass

    def after_train(self) -> None:
        pass

    def before_epoch(self) -> None:
        pass

    def after_epoch(self) -> None:
        pass

    def before_step(self) -> None:
        pass

    def after_step(self) -> None:
        pass


class TrainerBase:
    """Runs ``run_step`` from ``start_iter`` to ``max_iter`` with hooks; subclasses implement
    ``run_step``. Attributes hooks read: ``iter``, ``epoch``, ``start_iter``, ``max_iter``,
    ``iters_per_epoch``, ``max_epoch``, ``storage``."""

    def __init__(self) -> None:
        self._hooks: list[HookBase] = []
        self.iter = 0
        self.start_iter = 0
        self.max_iter = 0
        self.iters_per_epoch = 1
        self.storage: EventStorage

    @property
    def epoch(self) -> int:
        return self.iter // self.iters_per_epoch

    @property
    def max_epoch(self) -> int:
        return -(-self.max_iter // self.iters_per_epoch)

    @property
    def finished(self) -> bool:
        """True once the last iteration has run."""
        return self.iter >= self.max_iter - 1 and getattr(self, "_completed", False)

    def register_hooks(self, hooks: Iterable[Optional[HookBase]]) -> None:
        for h in hooks:
            if h is None:
                continue
            assert isinstance(h, HookBase), h
            # A weak reference avoids a reference cycle trainer <-> hook.
            h.trainer = weakref.proxy(self)
            self._hooks.append(h)

    def train(self, start_iter: int, max_iter: int, iters_per_epoch: int) -> None:
        self.iter = self.start_iter = int(start_iter)
        self.max_iter = int(max_iter)
        self.iters_per_epoch = max(1, int(iters_per_epoch))
        self._completed = False
        logger.info(
            f"Starting training from iteration {start_iter} (epoch {self.epoch}) to {max_iter} "
            f"({self.iters_per_epoch} iterations per epoch)"
        )
        with EventStorage(start_iter) as self.storage:
            try:
                self.before_train()
                for self.iter in range(start_iter, max_iter):
                    if self.iter == start_iter or self.iter % self.iters_per_epoch == 0:
                        self.before_epoch()
                    self.before_step()
                    self.run_step()
                    self.after_step()
                    if (self.iter + 1) % self.iters_per_epoch == 0:
                        self.after_epoch()
                # the loop leaves self.iter at the last iteration; hooks rely on it
                self._completed = True
            except UserError:
                logger.debug("Exception during training:", exc_info=True)  # the tool prints the message
                raise
            except Exception:
                logger.exception("Exception during training:")
                raise
            finally:
                self.after_train()

    def before_train(self) -> None:
        for h in self._hooks:
            h.before_train()

    def after_train(self) -> None:
        self.storage.iter = self.iter
        for h in self._hooks:
            h.after_train()

    def before_epoch(self) -> None:
        for h in self._hooks:
            h.before_epoch()

    def after_epoch(self) -> None:
        for h in self._hooks:
            h.after_epoch()

    def before_step(self) -> None:
        self.storage.iter = self.iter
        for h in self._hooks:
            h.before_step()

    def after_step(self) -> None:
        for h in self._hooks:
            h.after_step()

    def run_step(self) -> None:
        raise NotImplementedError


def _move_to(batch: Any, device: torch.device) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, Mapping):
        return {k: _move_to(v, device) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)) and batch and isinstance(batch[0], torch.Tensor):
        return type(batch)(_move_to(v, device) for v in batch)
    return batch


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
        data = next(self.data_loader_iter)
        if self.device.type == "cuda":
            data = _move_to(data, self.device)
        return data, time.perf_counter() - start

    def _params(self) -> list[torch.Tensor]:
        return [p for g in self.optimizer.param_groups for p in g["params"] if p.grad is not None]

    def _drop_frozen_grads(self) -> None:
        for p in self.frozen_parameters:
            p.grad = None

    def run_step(self) -> None:
        assert self.model.training, "[SimpleTrainer] the model was left in eval mode"
        data, data_time = self._next_batch()
        loss_dict = self.model(data)
        losses = self._total_loss(loss_dict)
        self.optimizer.zero_grad(set_to_none=True)
        losses.backward()
        self._drop_frozen_grads()
        if self.grad_clipper is not None:
            self.grad_clipper(self._params())
        self.optimizer.step()
        self._write_metrics(loss_dict, data_time)

    def _total_loss(self, loss_dict: Any) -> torch.Tensor:
        if isinstance(loss_dict, torch.Tensor):
            loss_dict = {"total_loss": loss_dict}
        if not isinstance(loss_dict, Mapping) or not loss_dict:
            raise TypeError(
                f"In training mode the model must return a non-empty dict of losses, got {type(loss_dict).__name__}"
            )
        self._last_loss_dict = {k: v.detach() for k, v in loss_dict.items()}
        losses = sum(loss_dict.values())
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

    def run_step(self) -> None:
        assert self.model.training, "[AMPTrainer] the model was left in eval mode"
        data, data_time = self._next_batch()
        with torch.autocast(device_type=self.device.type, dtype=self.amp_dtype):
            loss_dict = self.model(data)
            losses = self._total_loss(loss_dict)
        self.optimizer.zero_grad(set_to_none=True)
        if self.grad_scaler is None:
            losses.backward()
            self._drop_frozen_grads()
            if self.grad_clipper is not None:
                self.grad_clipper(self._params())
            self.optimizer.step()
        else:
            self.grad_scaler.scale(losses).backward()
            self._drop_frozen_grads()
            if self.grad_clipper is not None:
                self.grad_scaler.unscale_(self.optimizer)
                self.grad_clipper(self._params())
            self.grad_scaler.step(self.optimizer)
            self.grad_scaler.update()
        self._write_metrics(loss_dict, data_time)
