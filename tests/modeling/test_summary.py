"""The build-time model summary: parameters and FLOPs are logged, and nothing about the model or
the config can make it fail a build (upstream's FastRetri configs, with one-value
``INPUT.SIZE_TEST``, used to)."""

from __future__ import annotations

import logging

import pytest
import torch
from torch import nn

from fastreid.config import get_cfg
from fastreid.modeling import build_model
from fastreid.modeling.summary import log_model_summary, summary_image_size


def _cfg(*overrides):
    cfg = get_cfg()
    cfg.merge_from_list(["MODEL.DEVICE", "cpu", "MODEL.BACKBONE.PRETRAIN", False, *overrides])
    return cfg


@pytest.mark.parametrize(
    ("overrides", "size"),
    [
        ([], (256, 128)),
        (["INPUT.SIZE_TEST", [256]], (256, 256)),
        (["INPUT.SIZE_TEST", [256], "INPUT.CROP.ENABLED", True, "INPUT.CROP.SIZE", [224]], (224, 224)),
        (["INPUT.CROP.ENABLED", True, "INPUT.CROP.SIZE", [96, 48]], (96, 48)),
        (["INPUT.SIZE_TEST", [0]], None),
    ],
)
def test_summary_image_size_follows_the_test_transforms(overrides, size):
    assert summary_image_size(_cfg(*overrides)) == size


def test_fastretri_like_config_builds_and_logs_its_summary(fr_log):
    """FastRetri's base config: ResNet with FrozenBN, syncBN head, GeM pooling and a one-value
    SIZE_TEST (its cub.yml); here with ResNet-18 and small images."""
    cfg = _cfg(
        "MODEL.BACKBONE.DEPTH", "18x", "MODEL.BACKBONE.NORM", "FrozenBN", "MODEL.BACKBONE.FEAT_DIM", 512,
        "MODEL.HEADS.NORM", "syncBN", "MODEL.HEADS.POOL_LAYER", "GeneralizedMeanPooling",
        "MODEL.HEADS.NUM_CLASSES", 4, "INPUT.SIZE_TRAIN", [64], "INPUT.SIZE_TEST", [64],
        "INPUT.CROP.ENABLED", True, "INPUT.CROP.SIZE", [56],
    )  # fmt: skip
    model = build_model(cfg)
    assert model.heads.pool_layer.__class__.__name__ == "GeneralizedMeanPooling"
    assert "FLOPs (multiply-adds) for one 56x56 image" in fr_log.text


class _DictOutput(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return {"features": self.conv(x).mean((2, 3)), "maps": [self.conv(x)]}


class _Failing(nn.Module):
    def forward(self, x):
        raise RuntimeError("needs camera ids")


class _Parameterless(nn.Module):
    def forward(self, x):
        return x.mean((2, 3))


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        (_DictOutput(), "FLOPs (multiply-adds) for one 256x128 image"),
        (_Failing(), "FLOPs not counted (RuntimeError: needs camera ids)"),
        (_Parameterless(), "0 parameters"),
    ],
)
def test_summary_never_fails_whatever_the_model_returns(model, expected, caplog):
    logger = logging.getLogger("test_summary")
    with caplog.at_level(logging.INFO, logger="test_summary"):
        log_model_summary(model, _cfg(), logger)
    assert expected in caplog.text


def test_summary_with_a_size_it_cannot_derive(caplog):
    logger = logging.getLogger("test_summary")
    with caplog.at_level(logging.INFO, logger="test_summary"):
        log_model_summary(_Parameterless(), _cfg("INPUT.SIZE_TEST", [0]), logger)
    assert "FLOPs not counted (INPUT.SIZE_TEST keeps each image's own size)" in caplog.text
    # a config without INPUT at all
    with caplog.at_level(logging.INFO, logger="test_summary"):
        log_model_summary(_Parameterless(), object(), logger)
    assert "FLOPs not counted (AttributeError" in caplog.text
    assert torch.is_grad_enabled()
