"""Distiller: knowledge distillation as upstream's ``projects/FastDistill`` trains it.

The student is a Baseline built from the config; teachers are built from ``KD.MODEL_CONFIG``
(one config file per teacher, built as Baselines, syncBN read as BN) and loaded from
``KD.MODEL_WEIGHTS``. Training adds ``loss_jsdiv``: the Jensen-Shannon-style symmetric KL
divergence (temperature 16) between the student's and each teacher's class logits, averaged
over teachers. With ``KD.EMA.ENABLED`` a momentum copy of the student (``KD.EMA.MOMENTUM``) is
one more teacher (self-distillation). Eval is the student alone.

As upstream does, teachers are not sub-modules: the state dict (and so every checkpoint) holds
the student only, and teachers run in training mode without gradients (their class logits come
from the head's training outputs). ``model.to(...)`` moves them with the student.
"""

from __future__ import annotations

import copy
import logging
import os
from collections.abc import Mapping
from typing import Any, Callable, cast

import torch
import torch.nn.functional as F
from torch import nn

from fastreid.config import CfgNode, ConfigError, get_cfg
from fastreid.utils.checkpoint import Checkpointer

from .baseline import Baseline
from .build import META_ARCH_REGISTRY, build_model
from .common import loss_precision

__all__ = ["Distiller", "jsdiv_loss", "build_teachers"]

logger = logging.getLogger(__name__)


def _kl(y_s: torch.Tensor, y_t: torch.Tensor, t: float) -> torch.Tensor:
    p_s = F.log_softmax(y_s / t, dim=1)
    p_t = F.softmax(y_t / t, dim=1)
    return F.kl_div(p_s, p_t, reduction="sum") * (t**2) / y_s.shape[0]


def jsdiv_loss(y_s: torch.Tensor, y_t: torch.Tensor, t: float = 16.0) -> torch.Tensor:
    """``(KL(t || s) + KL(s || t)) / 2`` of the softened distributions, times ``t^2``, per sample."""
    return (_kl(y_s, y_t, t) + _kl(y_t, y_s, t)) / 2


def _as_teacher_cfg(cfg):
    cfg = cfg.clone()
    cfg.defrost()
    cfg.MODEL.META_ARCHITECTURE = "Baseline"
    for node in (cfg.MODEL.BACKBONE, cfg.MODEL.HEADS):
        if node.NORM == "syncBN":  # teachers are not wrapped in DDP
            node.NORM = "BN"
    return cfg


def _frozen(model: nn.Module) -> nn.Module:
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def build_teachers(cfg) -> list[nn.Module]:
    """The teachers of ``KD.MODEL_CONFIG`` with the weights of ``KD.MODEL_WEIGHTS``."""
    configs, weights = list(cfg.KD.MODEL_CONFIG), list(cfg.KD.MODEL_WEIGHTS)
    if len(configs) != len(weights):
        raise ConfigError(
            f"KD.MODEL_CONFIG has {len(configs)} teacher configs but KD.MODEL_WEIGHTS has "
            f"{len(weights)} weight files; give one weight file per teacher config"
        )
    teachers = []
    for config, weight in zip(configs, weights):
        if not os.path.isfile(config):
            raise ConfigError(
                f"KD.MODEL_CONFIG: teacher config {config!r} not found (paths are relative to "
                f"the current directory {os.getcwd()!r})"
            )
        cfg_t = get_cfg()
        cfg_t.merge_from_file(config)
        cfg_t = _as_teacher_cfg(cfg_t)
        cfg_t.MODEL.DEVICE = "cpu"
        cfg_t.MODEL.BACKBONE.PRETRAIN = False  # the teacher's own weights follow
        teacher = build_model(cfg_t, log_summary=False)
        logger.info(f"Loading teacher weights from {weight}")
        Checkpointer(teacher).load(weight)
        teachers.append(_frozen(teacher))
    return teachers


@META_ARCH_REGISTRY.register()
class Distiller(Baseline):
    teachers: list[nn.Module]  # set through __dict__ in __init__ (not sub-modules)

    def __init__(
        self,
        cfg: CfgNode | None = None,
        *,
        teachers: list[nn.Module] | None = None,
        ema_momentum: float | None = None,
        ema_weights: str = "",
        temperature: float = 16.0,
        **baseline_kwargs: Any,
    ) -> None:
        """``Distiller(cfg)`` as upstream, or explicitly: Baseline's keyword arguments plus the
        ``teachers`` (models with ``backbone`` and ``heads``), ``ema_momentum`` (None: no EMA
        teacher), ``ema_weights`` (a checkpoint the EMA teacher starts from; empty: a copy of the
        student) and the KD ``temperature``. Keywords given with a cfg override its values."""
        if cfg is not None:
            from_cfg = type(self).from_config(cfg)
            cfg_teachers, cfg_momentum, cfg_weights = (
                from_cfg.pop(k) for k in ("teachers", "ema_momentum", "ema_weights")
            )
            teachers = cfg_teachers if teachers is None else teachers
            ema_momentum = cfg_momentum if ema_momentum is None else ema_momentum
            ema_weights = ema_weights or cfg_weights
            baseline_kwargs = {**from_cfg, **baseline_kwargs}
        super().__init__(**baseline_kwargs)
        teachers = list(teachers or [])
        if ema_momentum is not None:
            ema = self._ema_copy()
            if ema_weights:
                logger.info(f"Loading self-distillation (EMA teacher) weights from {ema_weights}")
                Checkpointer(ema).load(ema_weights)
            teachers = [_frozen(ema)] + teachers
        if not teachers:
            raise ConfigError(
                "Distiller needs at least one teacher: set KD.MODEL_CONFIG and KD.MODEL_WEIGHTS, "
                "or KD.EMA.ENABLED True for self-distillation"
            )
        self.ema_momentum = ema_momentum
        self.temperature = temperature
        self.__dict__["teachers"] = list(teachers)  # not sub-modules: kept out of the state dict

    @classmethod
    def from_config(cls, cfg) -> dict:
        kwargs = super().from_config(cfg)
        kwargs["teachers"] = build_teachers(cfg)
        kwargs["ema_momentum"] = cfg.KD.EMA.MOMENTUM if cfg.KD.EMA.ENABLED else None
        kwargs["ema_weights"] = cfg.MODEL.WEIGHTS if cfg.KD.EMA.ENABLED else ""
        return kwargs

    @property
    def model_ts(self) -> list[nn.Module]:
        """Upstream's name for the teachers (the EMA copy first when enabled)."""
        return self.teachers

    def _ema_copy(self) -> nn.Module:
        return Baseline(
            backbone=copy.deepcopy(self.backbone),
            heads=copy.deepcopy(self.heads),
            pixel_mean=self.pixel_mean.flatten().tolist(),
            pixel_std=self.pixel_std.flatten().tolist(),
            loss_kwargs=self.loss_kwargs,
        )

    def _apply(self, fn: Callable, recurse: bool = True):
        super()._apply(fn, recurse)
        for teacher in self.__dict__.get("teachers", []):
            teacher._apply(fn, recurse)
        return self

    @torch.no_grad()
    def _momentum_update(self) -> None:
        ema, m = self.teachers[0], self.ema_momentum
        assert m is not None  # only called with EMA enabled
        for p_student, p_ema in zip(self.parameters(), ema.parameters()):
            p_ema.mul_(m).add_(p_student.detach(), alpha=1 - m)

    def forward(self, batched_inputs: Mapping[str, Any] | torch.Tensor):
        if not self.training:
            return super().forward(batched_inputs)
        images = self.preprocess_image(batched_inputs)
        targets = self.training_targets(batched_inputs)
        s_outputs = self.heads(self.backbone(images), targets)
        t_outputs = []
        with torch.no_grad():
            if self.ema_momentum is not None:
                self._momentum_update()
            for teacher in self.teachers:
                teacher.train()
                heads, backbone = (
                    cast(nn.Module, teacher.heads),
                    cast(nn.Module, teacher.backbone),
                )  # meta-architectures
                t_outputs.append(heads(backbone(images), targets))
        with torch.autocast(device_type=self.device.type, enabled=False):
            s_outputs = {k: loss_precision(v) for k, v in s_outputs.items()}
            loss_dict = self.losses(s_outputs, targets)
            s_logits = s_outputs["pred_class_logits"]
            kd = [
                jsdiv_loss(s_logits, loss_precision(t["pred_class_logits"]), self.temperature)
                for t in t_outputs
            ]
            loss_dict["loss_jsdiv"] = cast(torch.Tensor, sum(kd)) / len(kd)  # at least one teacher
        return loss_dict
