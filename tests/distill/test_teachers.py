"""DistillerOverhaul's teachers: strictly loaded (a checkpoint that does not match its config is
one line naming the file and the fix, before training), frozen and in eval mode whatever the
student's mode; the stage-feature backbone; the family table."""

from __future__ import annotations

import pytest
import torch
from distill_helpers import tiny  # tests/distill, on the path as the test's folder

from fastreid.config import ConfigError, get_cfg
from fastreid.config.families import FAMILIES
from fastreid.engine.trainers import trainer_for
from fastreid.modeling import build_model
from fastreid.projects.distill import DistillerOverhaul, DistillTrainer, TeacherCheckpointError
from fastreid.utils.checkpoint import Checkpointer

STUDENT = "configs/Distill/demo_student.yml"


def _student(teacher_files, *opts):
    config, weights = teacher_files
    cfg = tiny(STUDENT, "KD.MODEL_CONFIG", (config,), "KD.MODEL_WEIGHTS", (weights,), *opts)
    return cfg, build_model(cfg, log_summary=False)


def _batch():
    return {"images": torch.rand(4, 3, 64, 32) * 255, "targets": torch.tensor([0, 0, 1, 1])}


def test_the_family_and_its_trainer():
    assert FAMILIES["DistillerOverhaul"] == FAMILIES["build_resnet_backbone_distill"]
    cfg = get_cfg()
    cfg.merge_from_file("configs/Distill/demo_student.yml")
    assert trainer_for(cfg) is DistillTrainer
    base = get_cfg()
    base.merge_from_file("configs/Distill/kd-sbs_r101ibn-sbs_r34.yml")  # imports the family by its backbone
    assert (
        base.MODEL.BACKBONE.NAME == "build_resnet_backbone_distill"
        and base.MODEL.META_ARCHITECTURE == "Distiller"
    )


def test_teachers_stay_frozen_and_in_eval_mode(teacher_files):
    _, model = _student(teacher_files)
    assert isinstance(model, DistillerOverhaul)
    (teacher,) = model.teachers
    assert not any(p.requires_grad for p in teacher.parameters())
    model.train()
    assert model.training and not teacher.training and not any(m.training for m in teacher.modules())
    running = teacher.backbone.bn1.running_mean.clone()
    losses = model(_batch())
    assert {"loss_cls", "loss_triplet", "loss_jsdiv", "loss_overhaul"} <= set(losses)
    sum(losses.values()).backward()
    assert torch.equal(teacher.backbone.bn1.running_mean, running)  # eval mode: statistics untouched
    assert all(p.grad is None for p in teacher.parameters())
    assert model.connectors_0[0][0].weight.grad is not None
    model.eval()
    model.train(True)
    assert not teacher.training
    assert not any(k.startswith("teachers") for k in model.state_dict())  # checkpoints hold the student


def test_the_teacher_checkpoint_is_loaded_strictly(teacher_files, tmp_path):
    config, weights = teacher_files
    # the weights of another teacher (ResNet-34) for the ResNet-18 config
    other = build_model(
        tiny("configs/Distill/demo_teacher.yml", "MODEL.BACKBONE.DEPTH", "34x"), log_summary=False
    )
    Checkpointer(other, str(tmp_path)).save("other")
    wrong = str(tmp_path / "other.pth")
    cfg = tiny(STUDENT, "KD.MODEL_CONFIG", (config,), "KD.MODEL_WEIGHTS", (wrong,))
    with pytest.raises(TeacherCheckpointError) as e:
        build_model(cfg, log_summary=False)
    message = str(e.value)
    assert "\n" not in message and wrong in message and config in message
    assert "does not match the teacher config" in message and "set KD.MODEL_WEIGHTS" in message
    # the classifier counts too (fastreid's own Checkpointer lets it differ when fine-tuning)
    fewer = build_model(
        tiny("configs/Distill/demo_teacher.yml", "MODEL.HEADS.NUM_CLASSES", 3), log_summary=False
    )
    Checkpointer(fewer, str(tmp_path)).save("fewer")
    cfg = tiny(STUDENT, "KD.MODEL_CONFIG", (config,), "KD.MODEL_WEIGHTS", (str(tmp_path / "fewer.pth"),))
    with pytest.raises(TeacherCheckpointError, match=r"heads.weight \[3, 512\] vs \[5, 512\]"):
        build_model(cfg, log_summary=False)
    cfg = tiny(STUDENT, "KD.MODEL_CONFIG", (config,), "KD.MODEL_WEIGHTS", (str(tmp_path / "none.pth"),))
    with pytest.raises(TeacherCheckpointError, match="not found"):
        build_model(cfg, log_summary=False)


def test_mismatches_with_the_student_are_one_line(teacher_files):
    with pytest.raises(ConfigError, match="classifies 5 identities but the student 7"):
        _student(teacher_files, "MODEL.HEADS.NUM_CLASSES", 7)
    with pytest.raises(ConfigError, match="MODEL.BACKBONE.NAME build_resnet_backbone_distill"):
        _student(teacher_files, "MODEL.BACKBONE.NAME", "build_resnet_backbone")
    cfg, model = _student(teacher_files, "MODEL.BACKBONE.LAST_STRIDE", 2)
    with pytest.raises(ValueError, match="LAST_STRIDE"):
        model.train()(_batch())


def test_the_stage_features_are_the_resnets():
    cfg = tiny("configs/Distill/demo_teacher.yml")
    backbone = build_model(cfg, log_summary=False).backbone.eval()
    x = torch.randn(2, 3, 64, 32)
    with torch.no_grad():
        pre, final = backbone.extract_feature(x, preReLU=True)
        post, _ = backbone.extract_feature(x)
        plain = backbone(x)
    assert torch.allclose(final, plain) and torch.allclose(torch.relu(pre[-1]), plain)
    assert all(torch.allclose(torch.relu(a), b) for a, b in zip(pre, post))
    assert (pre[0] < 0).any()
    assert backbone.get_channel_nums() == [64, 128, 256, 512]
    with pytest.raises(ConfigError, match="WITH_NL False"):
        build_model(
            tiny("configs/Distill/demo_teacher.yml", "MODEL.BACKBONE.WITH_NL", True), log_summary=False
        )
