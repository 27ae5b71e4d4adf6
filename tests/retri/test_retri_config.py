"""The retrieval family's config: upstream's key and default, idempotent; the family table names
it for each data set name; upstream's own FastRetri config files merge unchanged (no
add_retri_config call) and build the model; configs/Retri mirror them; fastreid-train picks
RetriTrainer for a retrieval test set and keeps DefaultTrainer for re-ID."""

from __future__ import annotations

import os

import pytest
import torch

from fastreid.config import families, get_cfg
from fastreid.engine import DefaultTrainer
from fastreid.engine.trainers import registered_trainers, trainer_for
from fastreid.evaluation import ReidEvaluator
from fastreid.modeling import build_model
from fastreid.projects.retri import (
    Cars196,
    RetriEvaluator,
    RetriTrainer,
    add_retri_config,
    is_retrieval_dataset,
)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UPSTREAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "upstream_configs")
NAMES = ("CUB", "Cars196", "SOP", "InShop")
# upstream's project config (copied verbatim) -> its data set and TEST.RECALLS
CONFIGS = {
    "cub.yml": ("CUB", [1, 2, 4, 8, 16, 32]),
    "cars.yml": ("Cars196", [1, 2, 4, 8, 16, 32]),
    "sop.yml": ("SOP", [1, 10, 100, 1000]),
    "inshop.yml": ("InShop", [1, 10, 20, 30, 40, 50]),
}


def test_add_retri_config_adds_upstreams_key_and_is_idempotent():
    cfg = get_cfg()
    assert "RECALLS" not in cfg.TEST
    add_retri_config(cfg)
    assert cfg.TEST.RECALLS == [1, 2, 4, 8, 16, 32]
    cfg.TEST.RECALLS = [1, 10]
    add_retri_config(cfg)  # upstream's train_net calls it before merge_from_file; again changes nothing
    assert cfg.TEST.RECALLS == [1, 10]


def test_every_name_of_the_family_is_in_the_family_table():
    for name in NAMES:
        assert families.FAMILIES[name] == "fastreid.projects.retri:add_retri_config"
    assert registered_trainers()[Cars196] is RetriTrainer


def test_names_in_reads_upstreams_tuple_strings():
    # upstream's YAML writes DATASETS.NAMES as ("CUB",), which YAML reads as a string
    loaded = {"DATASETS": {"NAMES": '("CUB",)', "TESTS": "('SOP', 'Market1501')"}}
    assert families.names_in(loaded) == {"CUB", "SOP", "Market1501"}
    assert families.names_in({"DATASETS": {"NAMES": "InShop"}}) == {"InShop"}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_upstreams_config_merges_unchanged(name):
    cfg = get_cfg()  # no add_retri_config: naming a retrieval data set brings the key
    cfg.merge_from_file(os.path.join(UPSTREAM, name))
    dataset, recalls = CONFIGS[name]
    assert (dataset,) == cfg.DATASETS.NAMES and (dataset,) == cfg.DATASETS.TESTS
    assert recalls == cfg.TEST.RECALLS
    assert trainer_for(cfg) is RetriTrainer


def test_upstreams_model_builds():
    """The four files train the same model (ResNet-50, GeM, BNNeck; they differ in the loss's
    smoothing only): built once, from cub.yml."""
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(UPSTREAM, "cub.yml"))
    cfg.merge_from_list(
        ["MODEL.DEVICE", "cpu", "MODEL.BACKBONE.PRETRAIN", False, "MODEL.HEADS.NUM_CLASSES", 10]
    )
    torch.manual_seed(0)
    model = build_model(cfg, log_summary=False)
    model.eval()
    with torch.no_grad():
        features = model({"images": torch.rand(2, 3, 64, 64) * 255})
    assert features.shape == (2, 2048)


@pytest.mark.parametrize("name", sorted({*CONFIGS, "base-image_retri.yml"}))
def test_our_configs_are_upstreams(name):
    """configs/Retri/<name> has upstream's values but for the output folder."""
    upstream, ours = get_cfg(), get_cfg()
    upstream.merge_from_file(os.path.join(UPSTREAM, name))
    ours.merge_from_file(os.path.join(REPO, "configs", "Retri", name))
    assert upstream.OUTPUT_DIR.replace("projects/FastRetri/logs/", "logs/retri/") == ours.OUTPUT_DIR
    for cfg in (upstream, ours):
        cfg.OUTPUT_DIR = ""
    assert ours.dump() == upstream.dump()


def test_the_train_command_picks_the_familys_trainer_by_test_set():
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(REPO, "configs", "Market1501", "bagtricks_R50.yml"))
    assert trainer_for(cfg) is DefaultTrainer
    cfg.DATASETS.TESTS = ("Market1501", "CUB")
    assert trainer_for(cfg) is RetriTrainer
    assert is_retrieval_dataset("CUB") and not is_retrieval_dataset("Market1501")


def test_a_reid_test_set_keeps_the_reid_evaluator(monkeypatch):
    cfg = get_cfg()
    add_retri_config(cfg)
    monkeypatch.setattr(RetriTrainer, "build_test_loader", classmethod(lambda cls, cfg, name: ("loader", 5)))
    assert isinstance(RetriTrainer.build_evaluator(cfg, "CUB")[1], RetriEvaluator)
    assert isinstance(RetriTrainer.build_evaluator(cfg, "Market1501")[1], ReidEvaluator)


def test_the_demo_config_builds_its_small_model():
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(REPO, "configs", "Retri", "cub_demo.yml"))
    assert cfg.DATASETS.NAMES == ("CUB",) and cfg.MODEL.BACKBONE.DEPTH == "18x"
    assert cfg.TEST.RECALLS == [1, 2, 4, 8]
    assert trainer_for(cfg) is RetriTrainer
    cfg.MODEL.HEADS.NUM_CLASSES = 48
    model = build_model(cfg, log_summary=False)
    assert model.heads.weight.shape == (48, 512)
