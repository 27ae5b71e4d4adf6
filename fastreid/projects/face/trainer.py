"""``FaceTrainer``: :class:`~fastreid.engine.DefaultTrainer` for face recognition (upstream
FastFace's ``trainer.FaceTrainer``), registered for ``FaceBaseline`` so that the standard
``fastreid-train --config-file configs/Face/r50_ir.yml`` trains with it.

What differs from re-ID training:

- the training set is ``DATASETS.NAMES`` (``MS1MV2``: a folder per identity), or the RecordIO
  file ``DATASETS.REC_PATH`` when set;
- the test sets are verification pairs (``LFW``, ``CFP_FP``, ``AgeDB_30`` ...), read and checked
  (every image there) before training starts, evaluated by :class:`~.face_evaluator.FaceEvaluator`;
- with ``MODEL.HEADS.PFC.ENABLED`` the classifier is :class:`~.modeling.PartialFC`, outside the
  model: its centres are sharded across processes, have their own optimizer (SGD, the config's
  ``SOLVER`` values), LR schedules and checkpoints (``softmax_weight_*.pth``,
  :mod:`~.pfc_checkpointer`), and :class:`PFCTrainer` runs the step (the backbone's gradients
  clipped to norm 5, as upstream).
"""

from __future__ import annotations

import contextlib
import difflib
import logging
import os
import time
from typing import Any, Optional

import torch
from torch.nn.utils import clip_grad_norm_

from fastreid.config import ConfigError
from fastreid.data.build import build_reid_test_loader, build_reid_train_loader, datasets_root
from fastreid.data.datasets import DATASET_REGISTRY, UnknownDatasetError
from fastreid.data.transforms import build_transforms
from fastreid.engine import DefaultTrainer, hooks
from fastreid.engine.train_loop import HookBase, SimpleTrainer
from fastreid.engine.trainers import register_trainer
from fastreid.solver import build_optimizer
from fastreid.utils import comm
from fastreid.utils.checkpoint import unwrap_model
from fastreid.utils.params import ContiguousParams

from .datasets import FACE_TEST_SETS
from .face_data import MXFaceDataset, TestFaceDataset
from .face_evaluator import FaceEvaluator
from .modeling import FaceBaseline, PartialFC
from .pfc_checkpointer import PfcCheckpointer, PfcPeriodicCheckpointer

__all__ = ["FaceTrainer", "PFCTrainer", "face_test_set", "check_face_config"]

logger = logging.getLogger("fastreid.face")


def face_test_set(name: str) -> Any:
    """The registered verification set class ``name``; an unknown name, or a set that is not
    a pairs set, is an :class:`UnknownDatasetError` naming the closest pairs set."""
    cls = DATASET_REGISTRY.get(name) if name in DATASET_REGISTRY else None
    if cls is not None and getattr(cls, "task", "") == "face":
        return cls
    known = sorted({*FACE_TEST_SETS, *(n for n, c in DATASET_REGISTRY if getattr(c, "task", "") == "face")})
    close = [n for n in known if n.lower() == name.lower()] or difflib.get_close_matches(name, known, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    what = "not a verification pairs set" if cls is not None else "not a registered data set"
    raise UnknownDatasetError(
        f"{name!r} in DATASETS.TESTS is {what}.{hint} Face verification sets: {', '.join(known)}."
    )


def check_face_config(cfg: Any) -> None:
    """What must hold before anything trains: Partial FC's optimizer and sample rate, and every
    test set readable with all its images (a missing image: one line naming the list and the fix)."""
    pfc = cfg.MODEL.HEADS.get("PFC", None)
    if pfc is not None and pfc.ENABLED:
        if cfg.SOLVER.OPT != "SGD":
            raise ConfigError(
                f"MODEL.HEADS.PFC.ENABLED trains the class centres with SGD's momentum, kept per centre; "
                f"SOLVER.OPT is {cfg.SOLVER.OPT}: set SOLVER.OPT SGD (or MODEL.HEADS.PFC.ENABLED False)"
            )
        if not 0.0 < float(pfc.SAMPLE_RATE) <= 1.0:
            raise ConfigError(f"MODEL.HEADS.PFC.SAMPLE_RATE must be in (0, 1], got {pfc.SAMPLE_RATE}")
    for name in cfg.DATASETS.TESTS:
        face_test_set(name)(root=datasets_root())


class PFCTrainer(SimpleTrainer):
    """One step with Partial FC: the model's embeddings and labels go to ``pfc_module``, which
    returns the loss and the embeddings' gradient; backward through the model, its gradients
    clipped to norm 5, both optimizers step, the sampled centres are written back.

    ``PFCTrainer(model, data_loader, optimizer, param_wrapper, pfc_module, pfc_optimizer,
    amp_enabled=False, grad_scaler=None)`` (upstream's); ``amp_dtype`` is the autocast dtype
    of the precision decision (None: no autocast)."""

    def __init__(
        self,
        model: torch.nn.Module,
        data_loader: Any,
        optimizer: torch.optim.Optimizer,
        param_wrapper: Any,
        pfc_module: PartialFC,
        pfc_optimizer: torch.optim.Optimizer,
        amp_enabled: bool = False,
        grad_scaler: Any = None,
        *,
        amp_dtype: Optional[torch.dtype] = None,
    ) -> None:
        super().__init__(model, data_loader, optimizer, param_wrapper)
        self.pfc_module = pfc_module
        self.pfc_optimizer = pfc_optimizer
        if amp_enabled and amp_dtype is None:
            amp_dtype = torch.float16 if self.device.type == "cuda" else torch.bfloat16
        self.amp_dtype = amp_dtype
        self.grad_scaler = grad_scaler if amp_dtype == torch.float16 else None

    def _autocast(self) -> contextlib.AbstractContextManager:
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.amp_dtype)

    def run_step(self) -> None:
        assert self.model.training, "[PFCTrainer] the model was left in eval mode"
        start = time.perf_counter()
        data = next(self._data_loader_iter)
        data_time = time.perf_counter() - start

        with self._autocast():
            features, targets = self.model(data)
        f_grad, loss_v = self.pfc_module.forward_backward(features, targets, self.pfc_optimizer)
        self._write_metrics({"loss_cls": loss_v}, data_time)  # stops every process on a NaN first

        contiguous = isinstance(self.param_wrapper, ContiguousParams)
        self.optimizer.zero_grad(set_to_none=not contiguous)
        scaler = self.grad_scaler
        features.backward(
            f_grad.to(features.dtype) if scaler is None else scaler.scale(f_grad.to(features.dtype))
        )
        for p in self.frozen_parameters:
            p.grad = None
        if scaler is not None:
            scaler.unscale_(self.optimizer)
        clip_grad_norm_(self.model.parameters(), max_norm=5, norm_type=2)
        if scaler is None:
            self.optimizer.step()
        else:
            scaler.step(self.optimizer)
            scaler.update()

        self.pfc_optimizer.step()
        self.pfc_module.momentum_from(self.pfc_optimizer)
        self.pfc_module.update()
        self.pfc_optimizer.zero_grad()
        check = getattr(self.param_wrapper, "assert_buffer_is_valid", None)
        if callable(check):
            check()


class FaceTrainer(DefaultTrainer):
    """Upstream's ``FaceTrainer`` on this package's :class:`DefaultTrainer` (see the module
    docstring). With Partial FC: ``pfc_module``, ``pfc_optimizer``, ``pfc_scheduler`` and
    ``pfc_checkpointer``, as upstream names them."""

    pfc_module: Optional[PartialFC] = None

    def __init__(self, cfg: Any) -> None:
        check_face_config(cfg)
        super().__init__(cfg)

    # the Partial FC parts are built when DefaultTrainer.__init__ asks for the hooks: the model,
    # its optimizer, the trainer of one step and NUM_CLASSES (from the data) exist by then
    def _build_partial_fc(self) -> None:
        cfg = self.cfg
        heads = cfg.MODEL.HEADS
        embedding_size = heads.EMBEDDING_DIM if heads.EMBEDDING_DIM > 0 else cfg.MODEL.BACKBONE.FEAT_DIM
        parameter = next(unwrap_model(self.model).parameters())
        self.pfc_module = PartialFC(
            embedding_size,
            heads.NUM_CLASSES,
            heads.PFC.SAMPLE_RATE,
            heads.CLS_LAYER,
            heads.SCALE,
            heads.MARGIN,
            device=parameter.device,
            dtype=parameter.dtype,
        )
        self.pfc_optimizer: torch.optim.Optimizer = build_optimizer(cfg, self.pfc_module, False)[0]
        self.pfc_scheduler = self.build_lr_scheduler(cfg, self.pfc_optimizer, self.iters_per_epoch)
        self.pfc_checkpointer = PfcCheckpointer(
            self.pfc_module, cfg.OUTPUT_DIR, save_to_disk=comm.is_main_process(), **self.pfc_scheduler
        )
        step = self._trainer
        self._trainer = PFCTrainer(
            step.model,
            step.data_loader,
            step.optimizer,
            step.param_wrapper,
            self.pfc_module,
            self.pfc_optimizer,
            grad_scaler=step.grad_scaler,
            amp_dtype=getattr(step, "amp_dtype", None),
        )

    @property
    def pfc_enabled(self) -> bool:
        pfc = self.cfg.MODEL.HEADS.get("PFC", None)
        return bool(pfc is not None and pfc.ENABLED)

    def build_hooks(self) -> list[HookBase]:
        if self.pfc_enabled and self.pfc_module is None:
            self._build_partial_fc()
        ret = super().build_hooks()
        if self.pfc_enabled:
            # the centres' schedule steps with the model's; their checkpoints are written with the
            # model's (every process takes part), before the evaluation
            after_lr = next(i for i, h in enumerate(ret) if isinstance(h, hooks.LRScheduler)) + 1
            ret.insert(after_lr, hooks.LRScheduler(self.pfc_optimizer, self.pfc_scheduler))
            before_eval = next(i for i, h in enumerate(ret) if isinstance(h, hooks.EvalHook))
            ret.insert(
                before_eval, PfcPeriodicCheckpointer(self.pfc_checkpointer, self.cfg.SOLVER.CHECKPOINT_PERIOD)
            )
        return ret

    def resume_or_load(self, resume: bool = True) -> None:
        super().resume_or_load(resume)
        if not self.pfc_enabled:
            return
        if resume and self.checkpointer.has_checkpoint():
            if self.pfc_checkpointer.has_checkpoint():
                saved = self.pfc_checkpointer.resume_or_load("", resume=True)
                if saved.get("iteration") is not None and int(saved["iteration"]) + 1 != self.start_iter:
                    logger.warning(
                        f"The Partial FC centres were saved after iteration {int(saved['iteration']) + 1}, "
                        f"the model after iteration {self.start_iter}; training goes on with them"
                    )
            else:
                logger.warning(
                    f"Resuming without Partial FC centres ({self.cfg.OUTPUT_DIR} has no last_weight): "
                    "the class centres start anew"
                )

    @staticmethod
    def auto_scale_hyperparams(cfg: Any, num_classes: int) -> Any:
        """As :class:`DefaultTrainer` (``NUM_CLASSES`` 0 becomes the data's count); a configured
        count below the data's is refused (Partial FC would train the extra identities on no centre)."""
        configured = cfg.MODEL.HEADS.NUM_CLASSES
        if configured and configured < num_classes:
            raise ConfigError(
                f"The training data has {num_classes} identities but MODEL.HEADS.NUM_CLASSES is {configured}: "
                f"set MODEL.HEADS.NUM_CLASSES 0 (taken from the data) or at least {num_classes}"
            )
        return DefaultTrainer.auto_scale_hyperparams(cfg, num_classes)

    # ------------------------------------------------------------------ data

    @classmethod
    def build_train_loader(cls, cfg: Any, start_iter: int = 0) -> Any:
        path_imgrec = cfg.DATASETS.get("REC_PATH", "")
        if path_imgrec:
            logger.info("Prepare training set")
            train_set = MXFaceDataset(
                path_imgrec, build_transforms(cfg, is_train=True), max_pixels=cfg.INPUT.MAX_IMAGE_PIXELS
            )
            return build_reid_train_loader(cfg, train_set=train_set, start_iter=start_iter)
        return super().build_train_loader(cfg, start_iter=start_iter)

    @classmethod
    def build_test_loader(cls, cfg: Any, dataset_name: str) -> Any:
        """``(data_loader, is_same)`` of a verification set (upstream's return)."""
        dataset = face_test_set(dataset_name)(root=datasets_root())
        if comm.is_main_process():
            dataset.show_test()
        test_set = TestFaceDataset(
            dataset.carray,
            dataset.is_same,
            build_transforms(cfg, is_train=False),
            max_pixels=cfg.INPUT.MAX_IMAGE_PIXELS,
            name=dataset_name,
        )
        data_loader, _ = build_reid_test_loader(cfg, test_set=test_set)
        return data_loader, test_set.labels

    @classmethod
    def build_evaluator(cls, cfg: Any, dataset_name: str, output_dir: Optional[str] = None) -> Any:
        if output_dir is None:
            output_dir = os.path.join(cfg.OUTPUT_DIR, "visualization")
        data_loader, labels = cls.build_test_loader(cfg, dataset_name)
        return data_loader, FaceEvaluator(cfg, labels, dataset_name, output_dir)


register_trainer(FaceBaseline, FaceTrainer)
