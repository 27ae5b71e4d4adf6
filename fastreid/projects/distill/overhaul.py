"""``DistillerOverhaul``: knowledge distillation with overhaul feature distillation (upstream
FastDistill's ``overhaul``; Heo et al., ICCV 2019, clovaai/overhaul-distillation).

On top of :class:`~fastreid.modeling.meta_arch.distiller.Distiller`'s losses (Baseline's, and
``loss_jsdiv`` between the student's and the teachers' class logits), the student's four stage
features before their last ReLU are mapped to each teacher's channels by a *connector* (1x1 conv
and BatchNorm) and compared with the teacher's pre-ReLU features by the partial L2 loss of
:func:`distillation_loss`: the teacher's value is first raised to a per-channel *margin* (the
expected value of the teacher's negative responses, :func:`get_margin_from_BN`), and a position
counts where the student is above it or the teacher is positive. Stage ``j`` of 4 weighs
``1 / 2^(3 - j)``; ``loss_overhaul`` is the sum over teachers and stages divided by the number of
teachers, the batch size and 10000 (upstream's scale).

Teachers, here as the family promises (docs/distillation.md), unlike upstream's Distiller (which
runs them in training mode, their BatchNorms on the batch's statistics):

- frozen and in **eval mode at all times**, ``model.train()`` included; their class logits are
  the head's training outputs computed with every layer in eval mode;
- built from ``KD.MODEL_CONFIG`` and loaded **strictly** from ``KD.MODEL_WEIGHTS``: every tensor of
  the teacher, classifier included, must be in the file with its shape, or a one-line error names
  the file, the config and the fix, before anything trains;
- each normalises the images with its own ``MODEL.PIXEL_MEAN/STD`` (upstream: the student's).

As upstream, teachers are not sub-modules (checkpoints hold the student, its connectors and the
margins), and the student's and teachers' backbones must give stage features
(``build_resnet_backbone_distill``).
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from fastreid.config import CfgNode, ConfigError, get_cfg
from fastreid.modeling.meta_arch.baseline import Baseline
from fastreid.modeling.meta_arch.build import META_ARCH_REGISTRY, build_model
from fastreid.modeling.meta_arch.common import loss_precision
from fastreid.modeling.meta_arch.distiller import Distiller, jsdiv_loss
from fastreid.utils.checkpoint import Checkpointer

from ..registration import register_once

__all__ = [
    "DistillerOverhaul",
    "TeacherCheckpointError",
    "build_feature_connector",
    "distillation_loss",
    "get_margin_from_BN",
    "load_teacher",
    "teacher_outputs",
]

logger = logging.getLogger("fastreid.meta_arch.overhaul_distiller")


class TeacherCheckpointError(ConfigError):
    """A teacher checkpoint that does not hold the model its config builds."""


def distillation_loss(source: torch.Tensor, target: torch.Tensor, margin: torch.Tensor) -> torch.Tensor:
    """Overhaul's partial L2 distance, summed: ``target`` raised to ``margin``, squared errors
    where ``source > target`` or ``target > 0``."""
    target = torch.max(target, margin)
    loss = F.mse_loss(source, target, reduction="none")
    return (loss * ((source > target) | (target > 0)).to(loss.dtype)).sum()


def build_feature_connector(t_channel: int, s_channel: int) -> nn.Sequential:
    """``s_channel`` -> ``t_channel``: a 1x1 conv (He-normal over its output fan) and a BatchNorm
    (weight 1, bias 0). Keys ``0.weight``, ``1.*`` as upstream."""
    conv = nn.Conv2d(s_channel, t_channel, kernel_size=1, stride=1, padding=0, bias=False)
    nn.init.normal_(conv.weight, 0.0, math.sqrt(2.0 / t_channel))
    bn = nn.BatchNorm2d(t_channel)
    nn.init.ones_(bn.weight)
    nn.init.zeros_(bn.bias)
    return nn.Sequential(conv, bn)


def get_margin_from_BN(bn: nn.Module) -> torch.Tensor:
    """Per channel, the expected value of the negative part of ``N(beta, |gamma|^2)``, the
    distribution the norm ``bn`` gives its pre-ReLU output: ``m - s phi(m/s) / Phi(-m/s)`` with
    ``s = |gamma|``, ``m = beta``; ``-3 s`` where ``Phi(-m/s) <= 0.001`` (upstream's rule); ``min(m, 0)``
    where ``s = 0`` (a constant channel; upstream divides by zero). Float32, on ``bn``'s device."""
    weight = cast(torch.Tensor, bn.weight).detach()
    s = weight.abs().to(torch.float64).cpu()
    m = cast(torch.Tensor, bn.bias).detach().to(torch.float64).cpu()
    safe_s = torch.where(s > 0, s, torch.ones_like(s))
    z = m / safe_s
    cdf = 0.5 * torch.special.erfc(z / math.sqrt(2.0))  # Phi(-z)
    gaussian = torch.exp(-(z**2) / 2) / math.sqrt(2 * math.pi)
    margin = torch.where(cdf > 0.001, -safe_s * gaussian / torch.where(cdf > 0, cdf, 1.0) + m, -3 * s)
    margin = torch.where(s > 0, margin, torch.clamp(m, max=0.0))
    return margin.to(torch.float32).to(weight.device)


def _teacher_cfg(config: str) -> CfgNode:
    cfg_t = get_cfg()
    cfg_t.merge_from_file(config)
    cfg_t.defrost()
    cfg_t.MODEL.META_ARCHITECTURE = "Baseline"
    for node in (cfg_t.MODEL.BACKBONE, cfg_t.MODEL.HEADS):
        if node.NORM == "syncBN":  # teachers are not wrapped in DDP
            node.NORM = "BN"
    cfg_t.MODEL.DEVICE = "cpu"
    cfg_t.MODEL.BACKBONE.PRETRAIN = False  # the teacher's own weights follow
    return cfg_t


def load_teacher(teacher: nn.Module, weights: str, config: str) -> None:
    """Load ``weights`` into ``teacher`` (built from ``config``) strictly: every tensor, classifier
    included, present with its shape and nothing else, or a :class:`TeacherCheckpointError`."""
    fix = (
        f"set KD.MODEL_WEIGHTS to a checkpoint trained with {config} (its OUTPUT_DIR/model_final.pth), "
        "or KD.MODEL_CONFIG to the config.yaml saved beside the checkpoint"
    )
    if not os.path.isfile(weights):
        raise TeacherCheckpointError(f"KD.MODEL_WEIGHTS: teacher checkpoint {weights} not found: {fix}")
    saved = Checkpointer(teacher, strict_load=False)._load_file(weights)["model"]
    saved = {k[len("module.") :] if k.startswith("module.") else k: v for k, v in saved.items()}
    own = teacher.state_dict()
    missing = [k for k in own if k not in saved]
    unexpected = [k for k in saved if k not in own]
    mismatched = [k for k in own if k in saved and tuple(saved[k].shape) != tuple(own[k].shape)]
    if missing or unexpected or mismatched:
        what = []
        if missing:
            what.append(f"{len(missing)} tensors missing (e.g. {missing[0]})")
        if unexpected:
            what.append(f"{len(unexpected)} unexpected (e.g. {unexpected[0]})")
        if mismatched:
            k = mismatched[0]
            what.append(
                f"{len(mismatched)} of other shapes (e.g. {k} {list(saved[k].shape)} vs {list(own[k].shape)})"
            )
        raise TeacherCheckpointError(
            f"Teacher checkpoint {weights} does not match the teacher config {config}: {', '.join(what)}; {fix}"
        )
    teacher.load_state_dict({k: torch.as_tensor(v) for k, v in saved.items()}, strict=True)


def build_frozen_teachers(cfg: CfgNode) -> list[nn.Module]:
    """The teachers of ``KD.MODEL_CONFIG``, loaded strictly from ``KD.MODEL_WEIGHTS``, frozen, in
    eval mode. Each remembers its config file (``teacher_config``)."""
    configs, weights = list(cfg.KD.MODEL_CONFIG), list(cfg.KD.MODEL_WEIGHTS)
    if len(configs) != len(weights):
        raise ConfigError(
            f"KD.MODEL_CONFIG has {len(configs)} teacher configs but KD.MODEL_WEIGHTS has {len(weights)} "
            "weight files; give one weight file per teacher config"
        )
    teachers = []
    for config, weight in zip(configs, weights):
        if not os.path.isfile(config):
            raise ConfigError(
                f"KD.MODEL_CONFIG: teacher config {config!r} not found (paths are relative to the current "
                f"directory {os.getcwd()!r}); train the teacher first, or point at its config.yaml"
            )
        teacher = build_model(_teacher_cfg(config), log_summary=False)
        logger.info(f"Loading teacher weights from {weight} (strict)")
        load_teacher(teacher, weight, config)
        for p in teacher.parameters():
            p.requires_grad_(False)
        teacher.eval()
        teacher.__dict__["teacher_config"] = config
        teachers.append(teacher)
    return teachers


def teacher_outputs(teacher: nn.Module, images: torch.Tensor, targets: torch.Tensor) -> tuple[list, dict]:
    """``(pre-ReLU stage features, head outputs)`` of a teacher in eval mode: the head's training
    outputs (``pred_class_logits``, ...) computed with every layer in eval mode (only the head's own
    flag is set for the call; its BatchNorms use their running statistics)."""
    backbone, heads = cast(Any, teacher.backbone), cast(nn.Module, teacher.heads)
    feats, feat = backbone.extract_feature(images, preReLU=True)
    heads.training = True
    try:
        outputs = heads(feat, targets)
    finally:
        heads.training = False
    return feats, outputs


def _check_stage_backbone(backbone: nn.Module, who: str) -> None:
    if not all(hasattr(backbone, a) for a in ("extract_feature", "get_channel_nums", "get_bn_before_relu")):
        raise ConfigError(
            f"DistillerOverhaul compares stage features, which {who}'s backbone ({type(backbone).__name__}) "
            "does not give: set MODEL.BACKBONE.NAME build_resnet_backbone_distill in the student's and the "
            "teachers' configs"
        )


class DistillerOverhaul(Distiller):
    """Upstream's ``DistillerOverhaul(cfg)``; see the module docstring. ``connectors_{i}`` (one
    ModuleList per teacher) and the buffers ``margin{i}_{j}`` (j = 1..4) are upstream's names."""

    @classmethod
    def from_config(cls, cfg) -> dict:
        kwargs = Baseline.from_config(cfg)
        kwargs["teachers"] = build_frozen_teachers(cfg)
        kwargs["ema_momentum"] = cfg.KD.EMA.MOMENTUM if cfg.KD.EMA.ENABLED else None
        kwargs["ema_weights"] = cfg.MODEL.WEIGHTS if cfg.KD.EMA.ENABLED else ""
        return kwargs

    def __init__(self, cfg: CfgNode | None = None, **kwargs: Any) -> None:
        super().__init__(cfg, **kwargs)
        _check_stage_backbone(self.backbone, "the student")
        s_channels = cast(Any, self.backbone).get_channel_nums()
        student_classes = int(getattr(self.heads, "num_classes", 0))
        for i, teacher in enumerate(self.teachers):
            _check_stage_backbone(cast(nn.Module, teacher.backbone), f"teacher {i}")
            teacher_classes = int(getattr(teacher.heads, "num_classes", 0))
            if student_classes and teacher_classes and teacher_classes != student_classes:
                raise ConfigError(
                    f"teacher {teacher.__dict__.get('teacher_config', i)} classifies {teacher_classes} identities "
                    f"but the student {student_classes}: train the student on the teacher's DATASETS.NAMES"
                )
            for p in teacher.parameters():
                p.requires_grad_(False)
            teacher.eval()
            t_backbone = cast(Any, teacher.backbone)
            t_channels = t_backbone.get_channel_nums()
            setattr(
                self,
                f"connectors_{i}",
                nn.ModuleList(build_feature_connector(t, s) for t, s in zip(t_channels, s_channels)),
            )
            for j, bn in enumerate(t_backbone.get_bn_before_relu()):
                self.register_buffer(
                    f"margin{i}_{j + 1}", get_margin_from_BN(bn)[None, :, None, None].detach()
                )

    def train(self, mode: bool = True):
        """The student's mode; the teachers stay in eval mode."""
        super().train(mode)
        for teacher in self.__dict__.get("teachers", []):
            teacher.eval()
        return self

    @torch.no_grad()
    def _momentum_update(self) -> None:
        """The EMA teacher follows the student's parameters and (it runs in eval mode) its BatchNorm
        statistics."""
        super()._momentum_update()
        ema, m = self.teachers[0], cast(float, self.ema_momentum)
        student = dict(self.named_buffers())
        for name, buf in ema.named_buffers():
            own = student.get(name)
            if own is None or own.shape != buf.shape:
                continue
            if buf.is_floating_point():
                buf.mul_(m).add_(own, alpha=1 - m)
            else:
                buf.copy_(own)

    def forward(self, batched_inputs: Mapping[str, Any] | torch.Tensor):
        if not self.training:
            return Baseline.forward(self, batched_inputs)
        images = self.preprocess_image(batched_inputs)
        targets = self.training_targets(batched_inputs)
        s_feats, s_feat = cast(Any, self.backbone).extract_feature(images, preReLU=True)
        s_outputs = self.heads(s_feat, targets)
        t_feats_list, t_outputs = [], []
        with torch.no_grad():
            if self.ema_momentum is not None:
                self._momentum_update()
            for teacher in self.teachers:
                t_images = cast(Baseline, teacher).preprocess_image(batched_inputs)
                feats, outputs = teacher_outputs(teacher, t_images, targets)
                t_feats_list.append(feats)
                t_outputs.append(outputs)
        with torch.autocast(device_type=self.device.type, enabled=False):
            s_outputs = {k: loss_precision(v) for k, v in s_outputs.items()}
            return self.losses_overhaul(
                s_outputs,
                [loss_precision(f) for f in s_feats],
                [{k: loss_precision(v) for k, v in t.items()} for t in t_outputs],
                [[loss_precision(f) for f in feats] for feats in t_feats_list],
                targets,
            )

    def losses_overhaul(
        self,
        s_outputs: Mapping[str, torch.Tensor],
        s_feats: list[torch.Tensor],
        t_outputs: list[Mapping[str, torch.Tensor]],
        t_feats_list: list[list[torch.Tensor]],
        gt_labels: torch.Tensor,
    ) -> dict[str, torch.Tensor]:
        """Upstream's ``losses(s_outputs, s_feats, t_outputs, t_feats_list, gt_labels)``:
        Baseline's losses, ``loss_jsdiv`` and ``loss_overhaul``."""
        loss_dict = Baseline.losses(self, s_outputs, gt_labels)
        s_logits = s_outputs["pred_class_logits"]
        kd = [jsdiv_loss(s_logits, t["pred_class_logits"].detach(), self.temperature) for t in t_outputs]
        loss_dict["loss_jsdiv"] = cast(torch.Tensor, sum(kd)) / len(kd)
        loss_dict["loss_overhaul"] = overhaul_loss(self, s_feats, t_feats_list) / len(gt_labels)
        return loss_dict


def overhaul_loss(
    model: nn.Module, s_feats: list[torch.Tensor], t_feats_list: list[list[torch.Tensor]]
) -> torch.Tensor:
    """The sum over teachers ``i`` and stages ``j`` of ``distillation_loss(connector_i_j(s_j),
    t_i_j, margin_i_j) / 2^(J - 1 - j)``, divided by the number of teachers and 10000 (upstream's
    ``loss_overhaul`` before the division by the batch size)."""
    num = len(s_feats)
    total = s_feats[0].new_zeros(())
    for i, t_feats in enumerate(t_feats_list):
        connectors = cast(nn.ModuleList, getattr(model, f"connectors_{i}"))
        for j in range(num):
            source = connectors[j](s_feats[j])
            target = t_feats[j].detach()
            if source.shape != target.shape:
                raise ValueError(
                    f"stage {j + 1}: the student's feature map is {tuple(source.shape[2:])} but teacher {i}'s "
                    f"{tuple(target.shape[2:])}: give both the same INPUT sizes and MODEL.BACKBONE.LAST_STRIDE"
                )
            margin = cast(torch.Tensor, getattr(model, f"margin{i}_{j + 1}")).to(source.dtype)
            total = total + distillation_loss(source, target, margin) / 2 ** (num - j - 1)
    return total / len(t_feats_list) / 10000


register_once(META_ARCH_REGISTRY, DistillerOverhaul)
