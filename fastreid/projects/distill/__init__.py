"""Knowledge distillation (upstream FastReID's ``projects/FastDistill``, package ``fastdistill``).

Importing this package registers upstream's names: the meta architecture ``DistillerOverhaul``
(logit distillation as :class:`~fastreid.modeling.meta_arch.distiller.Distiller`, plus overhaul
feature distillation) with its trainer for ``fastreid-train``, and the backbone
``build_resnet_backbone_distill``. A config file naming either imports it
(:mod:`fastreid.config.families`), so the upstream way works::

    fastreid-train --config-file configs/Distill/sbs_r101ibn.yml                # the teacher
    fastreid-train --config-file configs/Distill/kd-sbs_r101ibn-sbs_r34.yml \\
        MODEL.META_ARCHITECTURE DistillerOverhaul \\
        KD.MODEL_CONFIG '("logs/distill/dukemtmc/r101_ibn/config.yaml",)' \\
        KD.MODEL_WEIGHTS '("logs/distill/dukemtmc/r101_ibn/model_final.pth",)'

Code written for upstream's project changes ``from fastdistill import *`` to
``from fastreid.projects.distill import *``. docs/distillation.md has the details.
"""

from .overhaul import (
    DistillerOverhaul,
    TeacherCheckpointError,
    build_feature_connector,
    distillation_loss,
    get_margin_from_BN,
)
from .resnet_distill import ResNetDistill, build_resnet_backbone_distill
from .trainer import DistillTrainer

__all__ = [
    "DistillTrainer",
    "DistillerOverhaul",
    "ResNetDistill",
    "TeacherCheckpointError",
    "add_distill_config",
    "build_feature_connector",
    "build_resnet_backbone_distill",
    "distillation_loss",
    "get_margin_from_BN",
]


def add_distill_config(cfg):
    """Nothing to add: the KD keys (``KD.MODEL_CONFIG``, ``KD.MODEL_WEIGHTS``, ``KD.EMA``) are in
    fastreid's defaults, as upstream's. Returns ``cfg`` (the family table's hook)."""
    return cfg
