"""The family's config keys: add_face_config (upstream's add_face_cfg) adds upstream's keys with
upstream's defaults and is idempotent; a config naming a face name gets them by itself; upstream's
config files merge unchanged and build their models."""

from __future__ import annotations

import os

import pytest

from fastreid.config import get_cfg
from fastreid.config.families import FAMILIES
from fastreid.engine.trainers import trainer_for
from fastreid.modeling import build_model
from fastreid.projects.face import FaceTrainer, add_face_cfg, add_face_config

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_add_face_config_adds_upstreams_keys_once():
    cfg = get_cfg()
    assert add_face_cfg is add_face_config
    add_face_config(cfg)
    assert cfg.DATASETS.REC_PATH == ""
    assert cfg.MODEL.BACKBONE.DROPOUT == 0.0
    assert cfg.MODEL.HEADS.PFC.ENABLED is False and cfg.MODEL.HEADS.PFC.SAMPLE_RATE == 0.1
    cfg.MODEL.HEADS.PFC.SAMPLE_RATE = 0.3
    cfg.DATASETS.REC_PATH = "x.rec"
    add_face_config(cfg)  # what upstream's train_net.py does before merge_from_file: nothing reset
    assert cfg.MODEL.HEADS.PFC.SAMPLE_RATE == 0.3 and cfg.DATASETS.REC_PATH == "x.rec"


def test_every_face_name_brings_in_the_family():
    names = [
        "FaceBaseline",
        "FaceHead",
        "MS1MV2",
        "LFW",
        "CFP_FP",
        "CFP_FF",
        "AgeDB_30",
        "CALFW",
        "CPLFW",
        "VGG2_FP",
    ]
    assert all(FAMILIES[n] == "fastreid.projects.face:add_face_config" for n in names)


def test_a_config_naming_the_face_head_gets_the_keys(tmp_path):
    path = tmp_path / "c.yml"
    path.write_text("MODEL:\n  HEADS:\n    NAME: FaceHead\n    PFC:\n      SAMPLE_RATE: 0.5\n")
    cfg = get_cfg()
    cfg.merge_from_file(str(path))
    assert cfg.MODEL.HEADS.PFC.SAMPLE_RATE == 0.5 and cfg.MODEL.HEADS.PFC.ENABLED is False


@pytest.mark.parametrize("name", ["face_base.yml", "r50_ir.yml", "face_demo.yml"])
def test_the_configs_merge_pick_the_face_trainer_and_build(name):
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(REPO, "configs", "Face", name))
    assert trainer_for(cfg) is FaceTrainer
    cfg.MODEL.DEVICE = "cpu"
    cfg.MODEL.HEADS.NUM_CLASSES = 10
    model = build_model(cfg)
    pfc = cfg.MODEL.HEADS.PFC.ENABLED
    assert ("heads.weight" in model.state_dict()) is (not pfc)
    if name == "r50_ir.yml":  # upstream's: IResNet-50 on 112x112 (no resize), 512 x 7 x 7 -> 512
        assert cfg.INPUT.SIZE_TRAIN == [0] and model.heads.bottleneck[0].weight.shape == (512, 25088, 1, 1)


@pytest.mark.slow
def test_r101_names_the_ir_se_backbone():
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(REPO, "configs", "Face", "r101_ir.yml"))
    cfg.MODEL.DEVICE = "cpu"
    cfg.MODEL.HEADS.NUM_CLASSES = 10
    model = build_model(cfg)
    assert cfg.MODEL.BACKBONE.NAME == "build_resnetIR_backbone" and cfg.MODEL.BACKBONE.WITH_SE
    assert "backbone.layer3.29.se.fc.0.weight" in model.state_dict()
