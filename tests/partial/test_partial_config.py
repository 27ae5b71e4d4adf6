"""add_partialreid_config (upstream's key, idempotent), the family table, and configs/PartialReID:
upstream's file unchanged but for OUTPUT_DIR, merged with no extra call."""

from __future__ import annotations

import os

import yaml

from fastreid.config import get_cfg
from fastreid.config.families import FAMILIES
from fastreid.engine.trainers import trainer_for
from fastreid.projects.partial import PartialTrainer, add_partialreid_config

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UPSTREAM = os.path.join(os.path.dirname(__file__), "data", "upstream_configs", "partial_market.yml")


def test_add_partialreid_config_adds_upstreams_key_once():
    cfg = get_cfg()
    assert "DSR" not in cfg.TEST
    add_partialreid_config(cfg)
    assert cfg.TEST.DSR.ENABLED is True
    cfg.TEST.DSR.ENABLED = False
    add_partialreid_config(cfg)  # a second call keeps the value
    assert cfg.TEST.DSR.ENABLED is False


def test_every_name_of_the_family_brings_in_its_keys():
    names = ["PartialBaseline", "DSRHead", "PartialREID", "PartialiLIDS", "OccludedREID"]
    assert {FAMILIES[n] for n in names} == {"fastreid.projects.partial:add_partialreid_config"}


def test_the_config_merges_without_a_call_and_trains_with_the_partial_trainer():
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(REPO, "configs", "PartialReID", "partial_market.yml"))
    assert cfg.TEST.DSR.ENABLED is True
    assert cfg.MODEL.HEADS.NAME == "DSRHead"
    assert cfg.DATASETS.TESTS == ("PartialREID", "PartialiLIDS", "OccludedREID")
    assert trainer_for(cfg) is PartialTrainer
    demo = get_cfg()
    demo.merge_from_file(os.path.join(REPO, "configs", "PartialReID", "partial_market_demo.yml"))
    assert demo.MODEL.META_ARCHITECTURE == "PartialBaseline" and demo.INPUT.SIZE_TEST == [256, 128]


def test_the_config_is_upstreams_but_for_the_output_folder():
    with open(UPSTREAM, encoding="utf-8") as f:
        upstream = yaml.safe_load(f)
    with open(os.path.join(REPO, "configs", "PartialReID", "partial_market.yml"), encoding="utf-8") as f:
        ours = yaml.safe_load(f)
    assert ours.pop("OUTPUT_DIR") == "logs/partial/test_partial"
    upstream.pop("OUTPUT_DIR")
    assert ours == upstream
