"""The classification family's config: upstream's FastClas config file merges unchanged (no extra
call) and builds the model; configs/Clas mirror it; the family table names the family for ClasHead
and Hymenoptera; fastreid-train picks ClasTrainer by the data set (upstream's config trains the plain
Baseline), while a registered meta architecture still decides first."""

from __future__ import annotations

import os

import pytest
import torch

from fastreid.config import families, get_cfg, validate_config
from fastreid.data.datasets import DATASET_REGISTRY
from fastreid.engine import DefaultTrainer
from fastreid.engine.trainers import register_trainer, registered_trainers, trainer_for
from fastreid.modeling import build_model
from fastreid.modeling.heads import ClasHead
from fastreid.modeling.meta_arch import Baseline
from fastreid.projects.attr import AttrTrainer
from fastreid.projects.clas import ClasTrainer, Hymenoptera, ImageFolderDataset, add_clas_config

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UPSTREAM = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "data", "upstream_configs", "base-clas.yaml"
)
OURS = os.path.join(REPO, "configs", "Clas", "base-clas.yml")
DEMO = os.path.join(REPO, "configs", "Clas", "base-clas_demo.yml")


def test_every_name_of_the_family_is_in_the_family_table():
    for name in ("ClasHead", "Hymenoptera"):
        assert families.FAMILIES[name] == "fastreid.projects.clas:add_clas_config"


def test_add_clas_config_adds_no_keys_as_upstream():
    cfg = get_cfg()
    before = cfg.dump()
    assert add_clas_config(cfg) is cfg and cfg.dump() == before


def test_upstreams_config_merges_unchanged_builds_the_model_and_passes_the_checks():
    cfg = get_cfg()
    cfg.merge_from_file(UPSTREAM)
    assert cfg.MODEL.META_ARCHITECTURE == "Baseline" and cfg.MODEL.HEADS.NAME == "ClasHead"
    assert cfg.INPUT.SIZE_TRAIN == [0] and cfg.DATASETS.NAMES == ("Hymenoptera",)
    validate_config(cfg)  # SIZE_TRAIN [0]: no resize before the random resized crop
    cfg.merge_from_list(["MODEL.DEVICE", "cpu", "MODEL.BACKBONE.PRETRAIN", False])
    torch.manual_seed(0)
    model = build_model(cfg, log_summary=False)
    assert isinstance(model, Baseline) and isinstance(model.heads, ClasHead)
    model.eval()
    with torch.no_grad():
        logits = model({"images": torch.rand(3, 3, 64, 64) * 255})
    assert logits.shape == (3, 2)
    assert trainer_for(cfg) is ClasTrainer


def test_our_config_is_upstreams_but_for_the_output_folder():
    upstream, ours = get_cfg(), get_cfg()
    upstream.merge_from_file(UPSTREAM)
    ours.merge_from_file(OURS)
    assert ours.OUTPUT_DIR == "logs/clas/r18_demo"
    upstream.OUTPUT_DIR = ours.OUTPUT_DIR = ""
    assert ours.dump() == upstream.dump()


def test_the_demo_config_builds_its_small_model():
    cfg = get_cfg()
    cfg.merge_from_file(DEMO)
    validate_config(cfg)
    assert cfg.DATASETS.NAMES == ("Hymenoptera",) and cfg.MODEL.BACKBONE.PRETRAIN is False
    assert trainer_for(cfg) is ClasTrainer
    assert build_model(cfg, log_summary=False).heads.weight.shape == (2, 512)


def test_the_trainer_is_found_by_data_set_after_the_meta_architecture(monkeypatch):
    assert registered_trainers()[ImageFolderDataset] is ClasTrainer
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(REPO, "configs", "Market1501", "bagtricks_R50.yml"))
    assert trainer_for(cfg) is DefaultTrainer  # Market1501: re-ID
    cfg.MODEL.HEADS.NAME = "ClasHead"
    assert trainer_for(cfg) is DefaultTrainer  # the head alone does not make it a classification run
    cfg.DATASETS.NAMES = cfg.DATASETS.TESTS = ("Hymenoptera",)
    assert trainer_for(cfg) is ClasTrainer
    variant = type("MyFolders", (ImageFolderDataset,), {})  # a user's folder data set
    monkeypatch.setitem(DATASET_REGISTRY._obj_map, "MyFolders", variant)
    cfg.DATASETS.NAMES = cfg.DATASETS.TESTS = ("MyFolders",)
    assert trainer_for(cfg) is ClasTrainer
    cfg.MODEL.META_ARCHITECTURE = "AttrBaseline"  # a family's meta architecture decides first
    assert trainer_for(cfg) is AttrTrainer
    with pytest.raises(TypeError, match="not a DefaultTrainer subclass"):
        register_trainer(ImageFolderDataset, object)  # type: ignore[arg-type]


def test_hymenoptera_is_registered_under_upstreams_name():
    from fastreid.data.datasets import DATASET_REGISTRY

    assert DATASET_REGISTRY.get("Hymenoptera") is Hymenoptera
    assert Hymenoptera.dataset_dir == "hymenoptera_data" and Hymenoptera.dataset_name == "hyt"


def test_size_zero_means_no_resize_only_for_the_input_sizes():
    from fastreid.config import ConfigError

    cfg = get_cfg()
    cfg.merge_from_list(["INPUT.SIZE_TRAIN", [0], "INPUT.SIZE_TEST", [0]])
    validate_config(cfg)
    for key, value in (("INPUT.SIZE_TRAIN", [0, 0]), ("INPUT.CROP.SIZE", [0])):
        bad = get_cfg()
        bad.merge_from_list(["INPUT.CROP.ENABLED", True, key, value])
        with pytest.raises(ConfigError, match=key):
            validate_config(bad)
