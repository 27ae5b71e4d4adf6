"""The project's trainer: it builds itself instead of calling DefaultTrainer.__init__ (as
upstream's FastFace does) and trains the outside classifier with its own trainer of one step."""

import logging
import os
import time

from torch.nn.parallel import DistributedDataParallel
from torch.nn.utils import clip_grad_norm_

from fastreid.data.build import build_reid_test_loader, datasets_root
from fastreid.data.datasets import DATASET_REGISTRY
from fastreid.data.transforms import build_transforms
from fastreid.engine import hooks
from fastreid.engine.defaults import DefaultTrainer, TrainerBase
from fastreid.engine.train_loop import AMPTrainer, SimpleTrainer
from fastreid.solver import build_optimizer
from fastreid.utils import comm
from fastreid.utils.checkpoint import Checkpointer
from fastreid.utils.logger import setup_logger

from .datasets import TestPairsDataset
from .face_evaluator import FaceEvaluator
from .modeling import CosineClassifier
from .pfc_checkpointer import PfcCheckpointer, PfcPeriodicCheckpointer


class FaceTrainer(DefaultTrainer):
    def __init__(self, cfg):
        TrainerBase.__init__(self)
        logger = logging.getLogger("fastreid.faceproj.trainer")
        if not logger.isEnabledFor(logging.INFO):
            setup_logger()

        data_loader = self.build_train_loader(cfg)
        cfg = self.auto_scale_hyperparams(cfg, data_loader.dataset.num_classes)
        model = self.build_model(cfg)
        optimizer, param_wrapper = self.build_optimizer(cfg, model)

        if cfg.MODEL.HEADS.PFC.ENABLED:
            self.pfc_module = CosineClassifier(
                cfg.MODEL.BACKBONE.FEAT_DIM, cfg.MODEL.HEADS.NUM_CLASSES, cfg.MODEL.HEADS.PFC.SCALE
            )
            self.pfc_optimizer, _ = build_optimizer(cfg, self.pfc_module, False)

        if comm.get_world_size() > 1:
            model = DistributedDataParallel(
                model, device_ids=[comm.get_local_rank()], broadcast_buffers=False
            )

        if cfg.MODEL.HEADS.PFC.ENABLED:
            self._trainer = PFCTrainer(
                model, data_loader, optimizer, param_wrapper, self.pfc_module, self.pfc_optimizer
            )
        else:
            self._trainer = (AMPTrainer if cfg.SOLVER.AMP.ENABLED else SimpleTrainer)(
                model, data_loader, optimizer, param_wrapper
            )

        self.iters_per_epoch = len(data_loader.dataset) // cfg.SOLVER.IMS_PER_BATCH
        self.scheduler = self.build_lr_scheduler(cfg, optimizer, self.iters_per_epoch)
        if cfg.MODEL.HEADS.PFC.ENABLED:
            self.pfc_scheduler = self.build_lr_scheduler(cfg, self.pfc_optimizer, self.iters_per_epoch)

        self.checkpointer = Checkpointer(
            model, cfg.OUTPUT_DIR, save_to_disk=comm.is_main_process(), optimizer=optimizer, **self.scheduler
        )
        if cfg.MODEL.HEADS.PFC.ENABLED:
            self.pfc_checkpointer = PfcCheckpointer(
                self.pfc_module, cfg.OUTPUT_DIR, optimizer=self.pfc_optimizer, **self.pfc_scheduler
            )

        self.start_epoch = 0
        self.max_epoch = cfg.SOLVER.MAX_EPOCH
        self.max_iter = self.max_epoch * self.iters_per_epoch
        self.warmup_iters = cfg.SOLVER.WARMUP_ITERS
        self.delay_epochs = cfg.SOLVER.DELAY_EPOCHS
        self.cfg = cfg

        self.register_hooks(self.build_hooks())

    def build_hooks(self):
        ret = super().build_hooks()
        if self.cfg.MODEL.HEADS.PFC.ENABLED:
            # before the writers
            ret.insert(
                len(ret) - 1,
                PfcPeriodicCheckpointer(self.pfc_checkpointer, self.cfg.SOLVER.CHECKPOINT_PERIOD),
            )
            ret.append(hooks.LRScheduler(self.pfc_optimizer, self.pfc_scheduler))
        return ret

    def resume_or_load(self, resume=True):
        super().resume_or_load(resume)
        if self.cfg.MODEL.HEADS.PFC.ENABLED:
            self.pfc_checkpointer.resume_or_load("", resume=resume)

    @classmethod
    def build_test_loader(cls, cfg, dataset_name):
        dataset = DATASET_REGISTRY.get(dataset_name)(root=datasets_root())
        test_set = TestPairsDataset(dataset.carray, dataset.is_same, build_transforms(cfg, is_train=False))
        data_loader, _ = build_reid_test_loader(cfg, test_set=test_set)
        return data_loader, test_set.labels

    @classmethod
    def build_evaluator(cls, cfg, dataset_name, output_dir=None):
        if output_dir is None:
            output_dir = os.path.join(cfg.OUTPUT_DIR, "visualization")
        data_loader, labels = cls.build_test_loader(cfg, dataset_name)
        return data_loader, FaceEvaluator(cfg, labels, dataset_name, output_dir)


class PFCTrainer(SimpleTrainer):
    """The model's features go to the outside classifier, which returns their gradient."""

    def __init__(self, model, data_loader, optimizer, param_wrapper, pfc_module, pfc_optimizer):
        super().__init__(model, data_loader, optimizer, param_wrapper)
        self.pfc_module = pfc_module
        self.pfc_optimizer = pfc_optimizer

    def run_step(self):
        assert self.model.training, "[PFCTrainer] model was changed to eval mode!"
        start = time.perf_counter()
        data = next(self._data_loader_iter)
        data_time = time.perf_counter() - start

        features, targets = self.model(data)
        f_grad, loss_v = self.pfc_module.forward_backward(features, targets, self.pfc_optimizer)
        features.backward(f_grad)
        clip_grad_norm_(self.model.parameters(), max_norm=5, norm_type=2)
        self.optimizer.step()

        self._write_metrics({"loss_cls": loss_v}, data_time)

        self.pfc_optimizer.step()
        self.pfc_module.update()
        self.optimizer.zero_grad()
        self.pfc_optimizer.zero_grad()
