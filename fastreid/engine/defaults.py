"""The standard training workflow, upstream's ``fastreid.engine.defaults``: ``DefaultTrainer`` and,
re-exported under upstream's names, the argument parser, the job setup and ``DefaultPredictor``.

``DefaultTrainer(cfg)`` builds the train loader, model, optimizer, LR schedules, checkpointer
and hooks from the config; its ``build_*`` class methods (:mod:`.trainer_builders`,
:mod:`.trainer_evaluation`) are the places to override.
"""

from __future__ import annotations

import inspect
import logging
import os
from typing import Any, Optional

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from fastreid.config import CfgNode
from fastreid.solver import build_gradient_clipper, optimizer_from
from fastreid.utils import comm
from fastreid.utils.checkpoint import Checkpointer, unwrap_model
from fastreid.utils.device import resolve_device
from fastreid.utils.events import CommonMetricPrinter, EventStorage, JSONWriter, TensorboardXWriter
from fastreid.utils.logger import setup_logger
from fastreid.utils.rng import capture_rng_states, restore_rng_states

from . import hooks
from .arguments import default_argument_parser
from .job_setup import default_setup
from .predictor import DefaultPredictor
from .train_loop import AMPTrainer, SimpleTrainer, TrainerBase
from .trainer_builders import TrainerBuilders, train_set_size_and_classes
from .trainer_evaluation import TrainerEvaluation

__all__ = ["DefaultPredictor", "DefaultTrainer", "default_argument_parser", "default_setup", "resolve_device"]

logger = logging.getLogger(__name__)


class DefaultTrainer(TrainerBuilders, TrainerEvaluation, TrainerBase):
    """Training with the standard workflow::

        trainer = DefaultTrainer(cfg)
        trainer.resume_or_load(resume=args.resume)  # last checkpoint, or MODEL.WEIGHTS
        trainer.train()

    Epochs as upstream counts them: ``iters_per_epoch = len(train set) // SOLVER.IMS_PER_BATCH``,
    ``max_iter = MAX_EPOCH * iters_per_epoch`` (or ``SOLVER.MAX_ITER`` when > 0).
    """

    def __init__(self, cfg: CfgNode) -> None:
        super().__init__()
        base_logger = logging.getLogger("fastreid")
        if not base_logger.isEnabledFor(logging.INFO) or not base_logger.handlers:
            setup_logger()
        resolve_device(cfg)

        data_loader = self.build_train_loader(cfg)
        train_size, num_classes = train_set_size_and_classes(data_loader)
        cfg = self.auto_scale_hyperparams(cfg, num_classes)
        model = self.build_model(cfg)
        optimizer = optimizer_from(self.build_optimizer(cfg, model))  # upstream subclasses return a tuple
        if comm.get_world_size() > 1:
            device_ids = [comm.get_local_rank()] if next(model.parameters()).is_cuda else None
            model = DistributedDataParallel(model, device_ids=device_ids, broadcast_buffers=False)

        trainer_cls = AMPTrainer if cfg.SOLVER.AMP.ENABLED else SimpleTrainer
        self._trainer = trainer_cls(model, data_loader, optimizer, build_gradient_clipper(cfg))

        self.iters_per_epoch = max(1, train_size // cfg.SOLVER.IMS_PER_BATCH)
        self.scheduler = self.build_lr_scheduler(cfg, optimizer, self.iters_per_epoch)
        self.plateau = self._build_plateau(cfg, optimizer, self.scheduler)

        # upstream's checkpoint entries (model, optimizer, lr_sched, warmup_sched), the scaler,
        # and the trainer's own state (iteration, RNG states, each hook's state)
        checkpointables: dict[str, Any] = {"optimizer": optimizer, **self.scheduler}
        if self._trainer.grad_scaler is not None:
            checkpointables["grad_scaler"] = self._trainer.grad_scaler
        checkpointables["trainer"] = self
        self.checkpointer = Checkpointer(
            model,
            cfg.OUTPUT_DIR,
            save_to_disk=comm.is_main_process(),
            strict_load=cfg.MODEL.WEIGHTS_STRICT,
            **checkpointables,
        )

        self.start_iter = 0
        self.max_iter = (
            cfg.SOLVER.MAX_ITER if cfg.SOLVER.MAX_ITER > 0 else cfg.SOLVER.MAX_EPOCH * self.iters_per_epoch
        )
        self.warmup_iters = cfg.SOLVER.WARMUP_ITERS
        self.delay_epochs = cfg.SOLVER.DELAY_EPOCHS
        self._pending_rng_states: Optional[dict] = None
        self.cfg = cfg
        self.register_hooks(self.build_hooks())

    # ------------------------------------------------------------------ state

    def resume_or_load(self, resume: bool = True) -> None:
        """With ``resume`` and a ``last_checkpoint`` in OUTPUT_DIR: load everything (model,
        optimizer, schedules, scaler, and through :meth:`load_state_dict` the iteration, RNG
        states and hook states) and continue after the saved iteration, with the sampler
        positioned there. Otherwise load ``MODEL.WEIGHTS`` (model only) and start at 0."""
        checkpoint = self.checkpointer.resume_or_load(self.cfg.MODEL.WEIGHTS, resume=resume)
        if not (resume and self.checkpointer.has_checkpoint()):
            return
        self._load_legacy_state(checkpoint)
        log = logging.getLogger("fastreid")
        if self.start_iter >= self.max_iter:
            log.info(
                f"The run in {self.cfg.OUTPUT_DIR} is complete ({self.max_iter} iterations); nothing to train "
                "(evaluate it again with --eval-only MODEL.WEIGHTS <OUTPUT_DIR>/model_final.pth)"
            )
            return
        log.info(
            f"Resuming after iteration {self.start_iter} (epoch {self.start_iter // self.iters_per_epoch + 1})"
        )
        if self.start_iter > 0:
            self._reposition_train_loader(self.start_iter)

    def _load_legacy_state(self, checkpoint: dict[str, Any]) -> None:
        """Checkpoints written before the trainer owned its state (or by upstream FastReID)."""
        if "trainer" in checkpoint:
            return  # already loaded by the checkpointer
        if "iteration" in checkpoint:
            self.start_iter = int(checkpoint["iteration"]) + 1
        elif "epoch" in checkpoint:  # upstream's epoch-based checkpoints
            self.start_iter = (int(checkpoint["epoch"]) + 1) * self.iters_per_epoch
        self._pending_rng_states = checkpoint.get("rng_states")
        if self.plateau is not None and "plateau" in checkpoint:
            self.plateau.load_state_dict(checkpoint["plateau"])

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["rng_states"] = capture_rng_states()
        return state

    def load_state_dict(self, state: Any) -> None:
        super().load_state_dict(state)
        self._pending_rng_states = state.get("rng_states")

    def _reposition_train_loader(self, start_iter: int) -> None:
        params = inspect.signature(self.build_train_loader).parameters
        if "start_iter" not in params:
            logging.getLogger("fastreid").warning(
                f"{type(self).__name__}.build_train_loader takes no start_iter; the resumed run "
                "starts a new sampler epoch instead of continuing the interrupted one"
            )
            return
        old = self._trainer.data_loader
        self._trainer.reset_data_loader(self.build_train_loader(self.cfg, start_iter=start_iter))
        shutdown = getattr(old, "shutdown", None)
        if callable(shutdown):
            shutdown()

    def before_train(self) -> None:
        super().before_train()
        # The loader iterator draws a seed from torch's global RNG when created; create it
        # before restoring the saved RNG states so the resumed stream matches the original.
        _ = self._trainer.data_loader_iter
        if self._pending_rng_states is not None:
            restore_rng_states(self._pending_rng_states)
            self._pending_rng_states = None

    def after_train(self) -> None:
        try:
            super().after_train()
        finally:
            shutdown = getattr(self._trainer.data_loader, "shutdown", None)
            if callable(shutdown):
                shutdown()

    def train(self) -> Optional[dict]:  # type: ignore[override]  # upstream's API: no arguments, the range comes from cfg
        """Train from ``start_iter`` to ``max_iter``; returns the last evaluation results.

        Checkpoints are written before evaluations; an evaluation that failed is reported
        (:class:`~fastreid.engine.hooks.EvaluationFailedError`) once training and its checkpoints
        are done. A run resumed after its last iteration does nothing."""
        if self.start_iter < self.max_iter:
            super().train(self.start_iter, self.max_iter, self.iters_per_epoch)
        elif any(h.pending() for h in self._hooks if isinstance(h, hooks.EvalHook)):
            self._run_pending_final_evaluation()
        else:
            return None
        self._record_final_state()
        failures = [f for h in self._hooks if isinstance(h, hooks.EvalHook) for f in h.failures]
        if failures:
            itr, message = failures[-1]
            saved = f"; the weights are saved in {self.cfg.OUTPUT_DIR}" if self.cfg.OUTPUT_DIR else ""
            raise hooks.EvaluationFailedError(
                f"{len(failures)} evaluation(s) failed, the last after iteration {itr + 1}: {message}{saved}. "
                "Fix the cause and evaluate with --eval-only MODEL.WEIGHTS <OUTPUT_DIR>/model_final.pth"
            )
        return getattr(self, "_last_eval_results", None)

    def _record_final_state(self) -> None:
        """model_final.pth is written before the final evaluation; once that evaluation is over,
        its trainer state (evaluation done, best metric, plateau) is written again, so that
        ``--resume`` of the finished run knows there is nothing left to do."""
        if comm.is_main_process() and self.cfg.OUTPUT_DIR:
            self.checkpointer.save("model_final", iteration=self.max_iter - 1, epoch=self.max_epoch - 1)

    def _run_pending_final_evaluation(self) -> None:
        """The run finished training but was stopped or killed in its final evaluation (which
        runs after the final checkpoint): evaluate now, with the hooks that use the results."""
        logging.getLogger("fastreid").info("Running the final evaluation, which the run did not finish")
        self.iter = self.start_iter - 1
        after_eval = (hooks.PreciseBN, hooks.EvalHook, hooks.PlateauHook, hooks.BestCheckpointer)
        with EventStorage(self.start_iter) as self.storage:
            for h in self._hooks:
                if isinstance(h, after_eval):
                    h.before_train()
            for h in self._hooks:
                if isinstance(h, hooks.PeriodicWriter):
                    h.after_train()

    def run_step(self) -> None:
        self._trainer.iter = self.iter
        self._trainer.iters_per_epoch = self.iters_per_epoch
        self._trainer.run_step()

    # ------------------------------------------------------------------ hooks

    def build_hooks(self) -> list[hooks.HookBase]:
        cfg = self.cfg
        ret: list[Optional[hooks.HookBase]] = [
            hooks.IterationTimer(),
            hooks.LRScheduler(
                self.optimizer, self.scheduler, cfg.SOLVER.WARMUP_ITERS, cfg.SOLVER.DELAY_EPOCHS
            ),
        ]
        if cfg.TEST.PRECISE_BN.ENABLED and hooks.get_bn_modules(unwrap_model(self.model)):
            ret.append(
                hooks.PreciseBN(
                    cfg.TEST.EVAL_PERIOD, self.model, self._precise_bn_loader, cfg.TEST.PRECISE_BN.NUM_ITER
                )
            )
        if len(cfg.MODEL.FREEZE_LAYERS) > 0 and cfg.SOLVER.FREEZE_ITERS > 0:
            ret.append(hooks.LayerFreeze(self.model, cfg.MODEL.FREEZE_LAYERS, cfg.SOLVER.FREEZE_ITERS))

        def test_and_save_results():
            self._last_eval_results = self.test(self.cfg, self.model)
            return self._last_eval_results

        # Checkpoints first: whatever evaluation does, the weights are on disk before it runs.
        # The plateau hook and the best model use the evaluation's results, so they follow it.
        if comm.is_main_process():
            ret.append(
                hooks.PeriodicCheckpointer(
                    self.checkpointer,
                    cfg.SOLVER.CHECKPOINT_PERIOD,
                    minutes=cfg.SOLVER.CHECKPOINT_MINUTES,
                    keep=cfg.SOLVER.CHECKPOINT_KEEP,
                )
            )
        ret.append(hooks.EvalHook(cfg.TEST.EVAL_PERIOD, test_and_save_results))
        ret.append(self.plateau)
        if comm.is_main_process():
            ret.append(hooks.BestCheckpointer(self.checkpointer, "metric"))
            ret.append(hooks.PeriodicWriter(self.build_writers(), cfg.SOLVER.LOG_PERIOD))
        return [h for h in ret if h is not None]

    def _precise_bn_loader(self):
        cfg = self.cfg.clone()
        cfg.defrost()
        cfg.DATALOADER.NUM_WORKERS = 0
        cfg.DATASETS.NAMES = (cfg.TEST.PRECISE_BN.DATASET,)
        return self.build_train_loader(cfg)

    @staticmethod
    def _build_plateau(
        cfg: CfgNode, optimizer: torch.optim.Optimizer, schedulers: dict
    ) -> Optional[hooks.PlateauHook]:
        p = cfg.SOLVER.PLATEAU
        if not p.ENABLED:
            return None
        return hooks.PlateauHook(optimizer, p.PATIENCE, p.FACTOR, p.MIN_LR, p.METRIC, schedulers=schedulers)

    def build_writers(self) -> list:
        return [
            CommonMetricPrinter(self.max_iter, self.iters_per_epoch),
            JSONWriter(os.path.join(self.cfg.OUTPUT_DIR, "metrics.json")),
            TensorboardXWriter(self.cfg.OUTPUT_DIR),
        ]

    # ------------------------------------------------------------------ accessors

    @property
    def model(self) -> nn.Module:
        return self._trainer.model

    @property
    def data_loader(self):
        return self._trainer.data_loader

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        return self._trainer.optimizer

    @property
    def grad_scaler(self):
        return self._trainer.grad_scaler

    @property
    def frozen_parameters(self) -> list:
        return self._trainer.frozen_parameters

    @frozen_parameters.setter
    def frozen_parameters(self, params: list) -> None:
        self._trainer.frozen_parameters = params
