"""The attribute family's config: upstream's keys and defaults, idempotent; the family table names
it for each of its names; upstream's own FastAttr config files merge unchanged (no add_attr_config
call) and build the model; configs/Attr mirror them; fastreid-train picks AttrTrainer."""

from __future__ import annotations

import os

import pytest
import torch

from fastreid.config import CfgNode, families, get_cfg
from fastreid.engine import DefaultTrainer
from fastreid.engine.trainers import trainer_for
from fastreid.modeling import build_model
from fastreid.modeling.meta_arch.build import META_ARCH_REGISTRY
from fastreid.projects.attr import AttrBaseline, AttrTrainer, add_attr_config
from fastreid.projects.registration import register_once
from fastreid.utils.registry import Registry

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UPSTREAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "upstream_configs")
NAMES = ("AttrBaseline", "AttrHead", "PA100K", "Market1501Attr", "DukeMTMCAttr")
# upstream's project config (copied verbatim) -> ours, and the attribute count each sets
CONFIGS = {"Base-attribute.yml": 26, "pa100.yml": 26, "market1501.yml": 27, "dukemtmc.yml": 23}


def test_add_attr_config_adds_upstreams_keys_and_is_idempotent():
    cfg = get_cfg()
    assert "BCE" not in cfg.MODEL.LOSSES and "THRES" not in cfg.TEST
    add_attr_config(cfg)
    assert cfg.MODEL.LOSSES.BCE.WEIGHT_ENABLED is True and cfg.MODEL.LOSSES.BCE.SCALE == 1.0
    assert cfg.TEST.THRES == 0.5
    cfg.MODEL.LOSSES.BCE.SCALE = 2.0
    cfg.TEST.THRES = 0.7
    add_attr_config(cfg)  # a second call (upstream's train_net after a config added them) changes nothing
    assert cfg.MODEL.LOSSES.BCE.SCALE == 2.0 and cfg.TEST.THRES == 0.7
    assert isinstance(cfg.MODEL.LOSSES.BCE, CfgNode)


def test_every_name_of_the_family_is_in_the_family_table():
    for name in NAMES:
        assert families.FAMILIES[name] == "fastreid.projects.attr:add_attr_config"


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_upstreams_config_merges_unchanged_and_builds_the_model(name):
    cfg = get_cfg()  # no add_attr_config: naming AttrBaseline brings the keys
    cfg.merge_from_file(os.path.join(UPSTREAM, name))
    num_classes = cfg.MODEL.HEADS.NUM_CLASSES
    assert cfg.MODEL.META_ARCHITECTURE == "AttrBaseline" and num_classes == CONFIGS[name]
    cfg.merge_from_list(["MODEL.DEVICE", "cpu", "MODEL.BACKBONE.PRETRAIN", False])
    torch.manual_seed(0)
    model = build_model(cfg, log_summary=False)
    assert isinstance(model, AttrBaseline)
    model.eval()
    with torch.no_grad():
        scores = model({"images": torch.rand(2, 3, 64, 32) * 255})
    assert scores.shape == (2, CONFIGS[name]) and bool(((scores >= 0) & (scores <= 1)).all())
    assert trainer_for(cfg) is AttrTrainer


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_our_configs_are_upstreams(name):
    """configs/Attr/<name> has upstream's values but for the pretrained-weights path (upstream's
    author's disk), the output folder and the attribute threshold made explicit."""
    upstream, ours = get_cfg(), get_cfg()
    upstream.merge_from_file(os.path.join(UPSTREAM, name))
    ours.merge_from_file(os.path.join(REPO, "configs", "Attr", name))
    for cfg in (upstream, ours):
        cfg.MODEL.BACKBONE.PRETRAIN_PATH = ""
        cfg.OUTPUT_DIR = ""
    assert ours.dump() == upstream.dump()


def test_the_train_command_picks_the_familys_trainer(monkeypatch):
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(REPO, "configs", "Market1501", "bagtricks_R50.yml"))
    assert trainer_for(cfg) is DefaultTrainer
    # a user's variant of AttrBaseline trains as AttrBaseline does
    variant = type("MyAttrBaseline", (AttrBaseline,), {})
    monkeypatch.setitem(META_ARCH_REGISTRY._obj_map, "MyAttrBaseline", variant)
    cfg.MODEL.META_ARCHITECTURE = "MyAttrBaseline"
    assert trainer_for(cfg) is AttrTrainer


def test_register_once_keeps_the_first_class():
    """Upstream's own FastAttr project registers PA100K, AttrHead, AttrBaseline itself before a
    config imports this family: the family then leaves those registrations in place."""
    registry = Registry("TEST")

    class PA100K:  # stands for upstream's class, registered first
        pass

    registry.register(PA100K)
    ours = type("PA100K", (), {})
    assert register_once(registry, ours) is ours
    assert registry.get("PA100K") is PA100K
    register_once(registry, PA100K)  # the same class again: nothing happens


def test_the_demo_config_builds_its_small_model():
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(REPO, "configs", "Attr", "pa100_demo.yml"))
    assert cfg.DATASETS.NAMES == ("PA100K",) and cfg.MODEL.BACKBONE.DEPTH == "18x"
    assert trainer_for(cfg) is AttrTrainer
    model = build_model(cfg, log_summary=False)
    assert model.heads.weight.shape == (26, 512)
