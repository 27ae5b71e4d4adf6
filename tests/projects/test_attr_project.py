"""An attribute project shaped like upstream's FastAttr (``attrproj``): its config keys added
before ``merge_from_file``, a data set in DATASET_REGISTRY with its own torch Dataset, a head in
REID_HEADS_REGISTRY, a meta-architecture with its own loss, a DatasetEvaluator, and a Trainer
overriding build_model / build_train_loader / build_test_loader / build_evaluator, run through
its ``main`` as ``train_net.py`` runs it: training, the final evaluation, ``--eval-only``."""

from __future__ import annotations

import os

import pytest
import tinynet  # noqa: F401  (registers the project's backbone)
import torch
from attrproj import train_net

from fastreid.config import ConfigError, get_cfg

CONFIG = "attrproj/configs/tiny_attr.yml"


def test_project_keys_must_be_added_before_the_file():
    cfg = get_cfg()
    with pytest.raises(ConfigError, match="BCE"):
        cfg.merge_from_file(os.path.join(os.path.dirname(__file__), CONFIG))


def test_trains_evaluates_and_evaluates_again_from_its_weights(project_args, tmp_path):
    args = project_args(CONFIG)
    results = train_net.main(args)
    assert set(results) == {"mA", "F1", "metric"} and 0.0 <= results["mA"] <= 100.0

    out = tmp_path / "out"
    cfg = train_net.setup(project_args(str(out / "config.yaml"), output="setup"))
    assert cfg.MODEL.HEADS.NUM_CLASSES == 8  # auto-scaled to the attributes, saved in config.yaml
    assert cfg.TEST.THRES == 0.5 and cfg.MODEL.LOSSES.BCE.WEIGHT_ENABLED

    weights = out / "model_final.pth"
    model_state = torch.load(weights, weights_only=True)["model"]
    assert model_state["heads.bnneck.running_mean"].shape == (8,)
    evaluated = train_net.main(
        project_args(str(out / "config.yaml"), "--eval-only", "MODEL.WEIGHTS", weights, output="eval")
    )
    assert evaluated == pytest.approx(results)


def test_build_model_sees_the_train_loaders_sample_weights(project_args):
    cfg = train_net.setup(project_args(CONFIG))
    cfg.defrost()
    cfg.MODEL.HEADS.NUM_CLASSES = 8
    train_net.AttrTrainer.build_train_loader(cfg)
    model = train_net.AttrTrainer.build_model(cfg)
    # two of the four colours are on per half; six training identities
    assert model.sample_weights.shape == (8,) and float(model.sample_weights.sum()) == pytest.approx(2.0)
