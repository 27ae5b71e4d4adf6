"""Face recognition (upstream FastReID's ``projects/FastFace``, package ``fastface``).

Importing this package registers upstream's names: the training set ``MS1MV2`` and the
verification sets ``LFW``, ``CFP_FP``, ``CFP_FF``, ``AgeDB_30``, ``CALFW``, ``CPLFW``, ``VGG2_FP``
(``DATASET_REGISTRY``), the backbones ``build_iresnet_backbone`` and ``build_resnetIR_backbone``,
the head ``FaceHead``, the meta architecture ``FaceBaseline``, and the trainer of
``FaceBaseline`` for ``fastreid-train``. A config file naming any of them imports it and gets its
keys (:func:`add_face_config`, through :mod:`fastreid.config.families`), so::

    fastreid-train --config-file configs/Face/r50_ir.yml

trains (with Partial FC when ``MODEL.HEADS.PFC.ENABLED``) and evaluates verification accuracy.
Code written for upstream's project changes ``from fastface import *`` to
``from fastreid.projects.face import *``. docs/face.md has the layouts and the metrics.

Upstream's ``fastface`` imports ``torch._six`` (``utils_amp.py``), which PyTorch removed in 2.0,
so upstream's project no longer imports on current PyTorch; this family has no such dependency.
"""

from . import verification
from .config import add_face_cfg, add_face_config
from .datasets import (
    CALFW,
    CFP_FF,
    CFP_FP,
    CPLFW,
    FACE_TEST_SETS,
    LFW,
    MS1MV2,
    VGG2_FP,
    AgeDB_30,
    FacePairs,
)
from .face_data import MXFaceDataset, TestFaceDataset
from .face_evaluator import FaceEvaluator
from .modeling import (
    FaceBaseline,
    FaceHead,
    IResNet,
    PartialFC,
    build_iresnet_backbone,
    build_resnetIR_backbone,
)
from .pfc_checkpointer import PfcCheckpointer, PfcPeriodicCheckpointer
from .trainer import FaceTrainer, PFCTrainer, check_face_config, face_test_set

__all__ = [
    "CALFW",
    "CFP_FF",
    "CFP_FP",
    "CPLFW",
    "FACE_TEST_SETS",
    "LFW",
    "MS1MV2",
    "VGG2_FP",
    "AgeDB_30",
    "FaceBaseline",
    "FaceEvaluator",
    "FaceHead",
    "FacePairs",
    "FaceTrainer",
    "IResNet",
    "MXFaceDataset",
    "PFCTrainer",
    "PartialFC",
    "PfcCheckpointer",
    "PfcPeriodicCheckpointer",
    "TestFaceDataset",
    "add_face_cfg",
    "add_face_config",
    "build_iresnet_backbone",
    "build_resnetIR_backbone",
    "check_face_config",
    "face_test_set",
    "verification",
]
