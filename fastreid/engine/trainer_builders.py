"""What ``DefaultTrainer`` builds for training, one class method each, the places to override:
the model, the optimizer, the LR schedules and the train loader, and the config adjusted to the
training set (``MODEL.HEADS.NUM_CLASSES`` 0)."""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch import nn

from fastreid.config import CfgNode
from fastreid.solver import build_lr_scheduler as _build_lr_scheduler
from fastreid.solver import build_optimizer as _build_optimizer
from fastreid.utils import comm

from .job_setup import write_config

__all__ = ["TrainerBuilders", "train_set_size_and_classes"]

# The name log lines have always carried (upstream's module); fastreid.engine.defaults re-exports.
logger = logging.getLogger("fastreid.engine.defaults")


def train_set_size_and_classes(data_loader: Any) -> tuple[int, int]:
    """The number of training samples and of identities, from the train loader's dataset."""
    dataset = getattr(data_loader, "dataset", None)
    if dataset is None:
        raise TypeError("The train loader has no .dataset; build_train_loader must return a DataLoader")
    num_classes = getattr(dataset, "num_classes", None)
    if num_classes is None:
        raise TypeError(
            f"The train loader's dataset ({type(dataset).__name__}) has no num_classes; "
            "it is needed for MODEL.HEADS.NUM_CLASSES 0"
        )
    return len(dataset), int(num_classes)


class TrainerBuilders:
    """The training-side ``build_*`` class methods of :class:`~fastreid.engine.defaults.DefaultTrainer`."""

    @classmethod
    def build_model(cls, cfg: CfgNode) -> nn.Module:
        from fastreid.modeling import build_model
        from fastreid.modeling.compile import apply_model_options

        model = apply_model_options(cfg, build_model(cfg))  # MODEL.COMPILE, MODEL.CHANNELS_LAST
        logger.debug(f"Model:\n{model}")
        return model

    @classmethod
    def build_optimizer(cls, cfg: CfgNode, model: nn.Module) -> torch.optim.Optimizer:
        return _build_optimizer(cfg, model)

    @classmethod
    def build_lr_scheduler(cls, cfg: CfgNode, optimizer: torch.optim.Optimizer, iters_per_epoch: int) -> dict:
        return _build_lr_scheduler(cfg, optimizer, iters_per_epoch)

    @classmethod
    def build_train_loader(cls, cfg: CfgNode, start_iter: int = 0):
        from fastreid.data.build import build_reid_train_loader

        logger.info("Prepare training set")
        return build_reid_train_loader(cfg, start_iter=start_iter)

    @staticmethod
    def auto_scale_hyperparams(cfg: CfgNode, num_classes: int) -> CfgNode:
        """``MODEL.HEADS.NUM_CLASSES`` 0 becomes the number of training identities (and the saved
        config.yaml is updated)."""
        cfg = cfg.clone()
        frozen = cfg.is_frozen()
        cfg.defrost()
        if cfg.MODEL.HEADS.NUM_CLASSES == 0:
            cfg.MODEL.HEADS.NUM_CLASSES = num_classes
            logger.info(f"Auto-scaling the num_classes={num_classes}")
            if comm.is_main_process() and cfg.OUTPUT_DIR:
                write_config(cfg, cfg.OUTPUT_DIR)
        if frozen:
            cfg.freeze()
        return cfg
