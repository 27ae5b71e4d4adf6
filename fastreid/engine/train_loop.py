"""The training loop and the trainers of one iteration.

``TrainerBase`` runs iterations and calls its hooks (``HookBase``) around them; ``SimpleTrainer``
implements one iteration (next batch, losses, backward, optimizer step) and ``AMPTrainer`` the same
under autocast.

Iterations are counted from 0 to ``max_iter - 1``; epoch ``e`` holds iterations
``[e * iters_per_epoch, (e + 1) * iters_per_epoch)``. Hooks see, in this order:
``before_train``, then for each iteration ``before_epoch`` (first iteration of an epoch only),
``before_step``, ``after_step``, ``after_epoch`` (last iteration of an epoch only), and finally
``after_train`` (also after an error, so files get closed; hooks check whether training
finished before doing end-of-training work).

Training state has owners: the trainer's :meth:`TrainerBase.state_dict` holds the iteration and
asks every hook for its own ``state_dict()``; the checkpointer stores it under ``trainer``.

A stop signal (see :mod:`fastreid.engine.interrupts`) ends the loop after the current iteration
(all ranks at the same one); ``after_train`` then sees ``trainer.stop_signals.requested`` and the
checkpointing hook writes a checkpoint to resume from.
"""

from __future__ import annotations

import contextlib
import logging
import math
import signal
import time
import weakref
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Optional, cast

import torch
from torch import nn

from fastreid.utils import comm
from fastreid.utils.device import describe_batch, out_of_memory_error
from fastreid.utils.errors import UserError
from fastreid.utils.events import EventStorage, get_event_storage
from fastreid.utils.params import ContiguousParams
from fastreid.utils.resume_hint import resume_command

from .interrupts import StopSignals, TrainingInterruptedError
from .peers import PeerHeartbeat, is_peer_failure

__all__ = ["AMPTrainer", "HookBase", "NonFiniteLossError", "SimpleTrainer", "TrainerBase"]

logger = logging.getLogger(__name__)


class HookBase:
    """Base class of training hooks. ``self.trainer`` is set (as a weak reference) on registration.

    A hook with state that must survive a resume returns it from ``state_dict()`` (plain
    Python values and tensors) and takes it back in ``load_state_dict()``.
    """

    trainer: TrainerBase

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        pass

    def before_train(self) -> None:
        """Once, before the first iteration (also of a resumed run)."""

    def after_train(self) -> None:
        """Once, after the last iteration, after a stop signal, or after an error."""

    def before_epoch(self) -> None:
        """Before the first iteration of an epoch, and before the first iteration of a run."""

    def after_epoch(self) -> None:
        """After the last iteration of an epoch."""

    def before_step(self) -> None:
        """Before every iteration."""

    def after_step(self) -> None:
        """After every iteration."""


class TrainerBase:
    """Runs ``run_step`` over a range of iterations with hooks; subclasses implement ``run_step``.

    Attributes hooks read: ``iter``, ``epoch``, ``start_iter``, ``max_iter``, ``iters_per_epoch``,
    ``start_epoch``, ``max_epoch``, ``storage``. ``start_epoch`` and ``max_epoch`` are the
    iteration range counted in epochs; setting them sets ``start_iter`` / ``max_iter``.
    """

    def __init__(self) -> None:
        self._hooks: list[HookBase] = []
        self.iter = 0
        self.start_iter = 0
        self.max_iter = 0
        self.iters_per_epoch = 1
        self.storage: EventStorage

    # Set from outside: the layer-freeze hook (a trainer with an optimizer step reads it) and the
    # checkpoint hook after a stop signal. Declared only: absent until set.
    frozen_parameters: list[torch.Tensor]
    interrupt_checkpoint: Optional[str]

    @property
    def epoch(self) -> int:
        return self.iter // self.iters_per_epoch

    @property
    def start_epoch(self) -> int:
        return self.start_iter // self.iters_per_epoch

    @start_epoch.setter
    def start_epoch(self, value: int) -> None:
        self.start_iter = int(value) * self.iters_per_epoch

    @property
    def max_epoch(self) -> int:
        return -(-self.max_iter // self.iters_per_epoch)

    @max_epoch.setter
    def max_epoch(self, value: int) -> None:
        self.max_iter = int(value) * self.iters_per_epoch

    def register_hooks(self, hooks: Iterable[Optional[HookBase]]) -> None:
        """Add hooks (None entries are skipped); they run in the order registered."""
        for h in hooks:
            if h is None:
                continue
            assert isinstance(h, HookBase), h
            # A weak reference avoids a reference cycle trainer <-> hook.
            h.trainer = weakref.proxy(self)
            self._hooks.append(h)

    @property
    def hooks(self) -> list[HookBase]:
        return list(self._hooks)

    # ------------------------------------------------------------------ state

    def _hook_keys(self) -> list[tuple[str, HookBase]]:
        """A stable name per hook: its class name, numbered when a class appears twice."""
        seen: dict[str, int] = {}
        keyed = []
        for h in self._hooks:
            name = type(h).__qualname__
            seen[name] = seen.get(name, 0) + 1
            keyed.append((name if seen[name] == 1 else f"{name}#{seen[name]}", h))
        return keyed

    def state_dict(self) -> dict[str, Any]:
        """``iteration`` (the last finished one) and each hook's own state under ``hooks``."""
        hooks_state = {}
        for key, h in self._hook_keys():
            state = h.state_dict()
            if state:
                hooks_state[key] = state
        return {"iteration": int(self.iter), "hooks": hooks_state}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue after ``state["iteration"]``; hand each hook its saved state. A saved hook
        this trainer does not have is skipped with a log line (checkpointing hooks exist on
        rank 0 only, so other ranks skip them quietly)."""
        self.start_iter = self.iter = int(state["iteration"]) + 1
        hooks = dict(self._hook_keys())
        for key, value in state.get("hooks", {}).items():
            if key in hooks:
                hooks[key].load_state_dict(value)
            elif comm.is_main_process():
                logger.warning(
                    f"The checkpoint holds the state of hook {key}, which this trainer does not have"
                )

    # ------------------------------------------------------------------ loop

    @property
    def finished(self) -> bool:
        """True once the last iteration has run."""
        return self.iter >= self.max_iter - 1 and getattr(self, "_completed", False)

    def _stop_agreed(self) -> bool:
        """Every rank stops after the same iteration: any rank's signal counts for all (one
        small all-reduce per iteration with several processes)."""
        return comm.all_reduce_flag(self.stop_signals.requested)

    def train(
        self,
        start_epoch: int,
        max_epoch: int,
        iters_per_epoch: int,
        *,
        start_iter: Optional[int] = None,
        max_iter: Optional[int] = None,
    ) -> None:
        """Run epochs ``start_epoch`` to ``max_epoch - 1`` of ``iters_per_epoch`` iterations each
        (upstream's arguments). ``start_iter`` / ``max_iter``, when given, set the range to the
        iteration instead (a run resumed mid-epoch, ``SOLVER.MAX_ITER``)."""
        self.iters_per_epoch = max(1, int(iters_per_epoch))
        first = int(start_epoch) * self.iters_per_epoch if start_iter is None else int(start_iter)
        end = int(max_epoch) * self.iters_per_epoch if max_iter is None else int(max_iter)
        self.iter = self.start_iter = first
        self.max_iter = end
        self._completed = False
        self.stopping = False
        self.stopped_at: Optional[int] = None
        logger.info(
            f"Starting training from iteration {first} (epoch {self.epoch}) to {end} "
            f"({self.iters_per_epoch} iterations per epoch)"
        )
        heartbeat = PeerHeartbeat().start()
        with EventStorage(first) as self.storage, StopSignals() as self.stop_signals:
            try:
                self.before_train()
                for self.iter in range(first, end):
                    if self.iter == first or self.iter % self.iters_per_epoch == 0:
                        self.before_epoch()
                    self.before_step()
                    self.run_step()
                    self.after_step()
                    # agreed before after_epoch: evaluation is skipped on every rank alike
                    self.stopping = self._stop_agreed()
                    if (self.iter + 1) % self.iters_per_epoch == 0:
                        self.after_epoch()
                    if self.stopping:
                        self.stopped_at = self.iter
                        if not self.stop_signals.requested:  # another rank's signal
                            self.stop_signals.signum = int(signal.SIGTERM)
                        break
                else:
                    # the loop leaves self.iter at the last iteration; hooks rely on it
                    self._completed = True
            except UserError:
                raise  # its message says it all; run_tool prints it, the log keeps the traceback
            except Exception as e:
                if comm.get_world_size() > 1 and is_peer_failure(e):
                    logger.debug("Collective failure:", exc_info=True)
                    raise heartbeat.error(e, self.iter) from e
                logger.exception("Exception during training:")
                raise
            finally:
                heartbeat.stop()
                self.after_train()
            if self.stopped_at is not None:
                raise self._interrupted_error()

    def _interrupted_error(self) -> TrainingInterruptedError:
        assert self.stopped_at is not None  # only called after a stop signal
        saved = getattr(self, "interrupt_checkpoint", None)
        where = f"; checkpoint saved to {saved}" if saved else ""
        return TrainingInterruptedError(
            f"{self.stop_signals.name} stopped training after iteration {self.stopped_at + 1} "
            f"(epoch {self.epoch + 1}){where}. Resume with: {resume_command()}",
            exit_code=self.stop_signals.exit_code,
        )

    def _call_hooks(self, stage: str) -> None:
        """Call the hook method named ``stage`` (e.g. ``"after_step"``) of every hook, in order."""
        for h in self._hooks:
            getattr(h, stage)()

    def before_train(self) -> None:
        self._call_hooks("before_train")

    def after_train(self) -> None:
        """Every hook's ``after_train`` runs (files get closed) even when one of them raises;
        the first error is raised afterwards."""
        self.storage.iter = self.iter
        first_error: Optional[BaseException] = None
        for h in self._hooks:
            try:
                h.after_train()
            except Exception as e:
                logger.debug(f"{type(h).__name__}.after_train failed", exc_info=True)
                first_error = first_error or e
        if first_error is not None:
            raise first_error

    def before_epoch(self) -> None:
        self._call_hooks("before_epoch")

    def after_epoch(self) -> None:
        self._call_hooks("after_epoch")

    def before_step(self) -> None:
        self.storage.iter = self.iter
        self._call_hooks("before_step")

    def after_step(self) -> None:
        self._call_hooks("after_step")

    def run_step(self) -> None:
        raise NotImplementedError


class NonFiniteLossError(UserError, FloatingPointError):
    """The loss became NaN or infinite; the message names the iteration and the loss terms."""


def _model_device(model: nn.Module) -> torch.device:
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


class SimpleTrainer(TrainerBase):
    """One iteration: next batch, ``loss_dict = model(batch)``, the losses checked finite on every
    rank (before backward, so a NaN never reaches the weights), backward, optimizer step (which
    clips the gradients when the optimizer was built with ``SOLVER.CLIP_GRADIENTS``, as upstream's:
    :func:`fastreid.solver.maybe_add_gradient_clipping`).

    ``param_wrapper`` is what upstream's ``build_optimizer`` returns next to the optimizer
    (upstream's ``ContiguousParams``; None from this package's); when it has ``assert_buffer_is_valid`` that is
    called after each step, as upstream does; the gradients of such a wrapper are views of its
    buffer, so they are zeroed, never dropped. ``frozen_parameters`` (set by the layer-freeze hook) have their gradients dropped before the
    step, so the optimizer leaves them (and their weight decay and momentum) untouched.
    """

    def __init__(
        self,
        model: nn.Module,
        data_loader: Iterable,
        optimizer: torch.optim.Optimizer,
        param_wrapper: Any,
    ) -> None:
        super().__init__()
        model.train()
        self.model = model
        self.data_loader = data_loader
        self._data_iter: Optional[Iterator] = None
        self.optimizer = optimizer
        self.param_wrapper = param_wrapper
        self.grad_scaler: Optional[Any] = None
        self.frozen_parameters: list[torch.Tensor] = []
        self.device = _model_device(model)

    @property
    def _data_loader_iter(self) -> Iterator:
        """The iterator over ``data_loader`` (upstream's attribute), created on first use: the
        resumed trainer creates it before restoring the saved RNG states."""
        if self._data_iter is None:
            self._data_iter = iter(self.data_loader)
        return self._data_iter

    @_data_loader_iter.setter
    def _data_loader_iter(self, iterator: Iterator) -> None:
        self._data_iter = iterator

    def reset_data_loader(self, data_loader: Iterable) -> None:
        """Use a new loader (e.g. one positioned at the resumed iteration)."""
        self.data_loader = data_loader
        self._data_iter = None

    def run_step(self) -> None:
        assert self.model.training, f"[{type(self).__name__}] the model was left in eval mode"
        start = time.perf_counter()
        # the loader moves batches to the device (DataLoaderX's CUDA prefetch); the model
        # accepts a batch already there or still on the CPU
        data = next(self._data_loader_iter)
        data_time = time.perf_counter() - start
        try:
            with self._autocast():
                loss_dict = self._loss_dict(self.model(data))
                losses = cast(torch.Tensor, sum(loss_dict.values()))  # non-empty, so a tensor
            self._write_metrics(loss_dict, data_time)
            self._backward_and_step(losses)
        except torch.cuda.OutOfMemoryError as e:
            raise out_of_memory_error(
                e,
                doing=f"training iteration {self.iter + 1}",
                batch=describe_batch(data),
                settings="SOLVER.IMS_PER_BATCH (the batch of all processes together) or INPUT.SIZE_TRAIN",
                after="; the checkpoints written so far are kept (continue from the last with --resume)",
            ) from e

    def _autocast(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    @staticmethod
    def _loss_dict(outputs: Any) -> Mapping[str, torch.Tensor]:
        if isinstance(outputs, torch.Tensor):
            return {"total_loss": outputs}
        if not isinstance(outputs, Mapping) or not outputs:
            raise TypeError(
                f"In training mode the model must return a non-empty dict of losses, got {type(outputs).__name__}"
            )
        return outputs

    def _backward_and_step(self, losses: torch.Tensor) -> None:
        """Backward, frozen gradients dropped, optimizer step (through the GradScaler when there
        is one: it unscales the gradients before the optimizer's step clips them)."""
        contiguous = isinstance(self.param_wrapper, ContiguousParams)
        self.optimizer.zero_grad(set_to_none=not contiguous)
        scaler = self.grad_scaler
        (losses if scaler is None else scaler.scale(losses)).backward()
        for p in self.frozen_parameters:
            if not contiguous:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()  # a view of the wrapper's buffer: kept (weight decay still applies)
        if scaler is None:
            self.optimizer.step()
        else:
            scaler.step(self.optimizer)
            scaler.update()
        check = getattr(self.param_wrapper, "assert_buffer_is_valid", None)
        if callable(check):
            check()

    def _write_metrics(self, loss_dict: Mapping[str, Any], data_time: float) -> None:
        """Put the losses (averaged over ranks) and ``data_time`` in the event storage. Every rank
        learns whether any rank's loss is not finite, so all stop together with
        :class:`NonFiniteLossError`."""
        local = {k: torch.as_tensor(v).detach().float().reshape(()) for k, v in loss_dict.items()}
        reduced = {k: float(v) for k, v in comm.reduce_dict(local, average=True).items()}
        total = sum(reduced.values())
        if not all(math.isfinite(v) for v in reduced.values()) or not math.isfinite(total):
            terms = ", ".join(f"{k}={v}" for k, v in reduced.items())
            raise NonFiniteLossError(
                f"Loss became infinite or NaN at iteration {self.iter} (epoch {self.epoch}): {terms}. "
                "Training stopped; lower SOLVER.BASE_LR, enable SOLVER.CLIP_GRADIENTS, or check the data."
            )
        storage = get_event_storage()
        storage.put_scalar("data_time", data_time)
        storage.put_scalar("total_loss", total)
        for k, v in reduced.items():
            if k != "total_loss":
                storage.put_scalar(k, v)


class AMPTrainer(SimpleTrainer):
    """Mixed precision: float16 autocast + GradScaler on CUDA (``grad_scaler``, or a new one),
    bfloat16 autocast elsewhere (bfloat16 has float32's range, so no loss scaling is needed
    and ``grad_scaler`` is not used). ``amp_dtype`` chooses the autocast dtype instead (the
    precision decision's, :mod:`fastreid.utils.precision`); a GradScaler goes with float16 only."""

    def __init__(
        self,
        model: nn.Module,
        data_loader: Iterable,
        optimizer: torch.optim.Optimizer,
        param_wrapper: Any,
        grad_scaler: Optional[Any] = None,
        *,
        amp_dtype: Optional[torch.dtype] = None,
    ) -> None:
        super().__init__(model, data_loader, optimizer, param_wrapper)
        if amp_dtype is None:
            amp_dtype = torch.float16 if self.device.type == "cuda" else torch.bfloat16
        self.amp_dtype = amp_dtype
        if amp_dtype == torch.float16 and self.device.type == "cuda":
            self.grad_scaler = grad_scaler or torch.amp.GradScaler("cuda")
        else:
            self.grad_scaler = None
        logger.info(f"Mixed precision on {self.device.type}: autocast to {self.amp_dtype}")

    def _autocast(self) -> contextlib.AbstractContextManager:
        return torch.autocast(device_type=self.device.type, dtype=self.amp_dtype)
