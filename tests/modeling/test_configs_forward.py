"""Every shipped config builds a model that trains and evaluates one tiny batch on the CPU, or,
when it names an upstream model fastreid does not build yet, fails with the clear error.

Configs that differ only outside the model (data, solver, input sizes) share one model check.
"""

import math
from pathlib import Path

import pytest
import torch
from shipped_configs import reid_configs

from fastreid.config import ConfigError, get_cfg
from fastreid.modeling import build_model
from fastreid.modeling.backbones import UNSUPPORTED_BACKBONES
from fastreid.modeling.meta_arch import UNSUPPORTED_META_ARCHS

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"
CONFIGS = [CONFIG_DIR.parent / p for p in reid_configs()]  # a task family's configs: its own tests
_checked: dict[str, str] = {}  # model part of the cfg -> outcome already verified


def tiny_cfg(path: Path):
    cfg = get_cfg()
    cfg.merge_from_file(str(path))
    cfg.MODEL.DEVICE = "cpu"
    cfg.MODEL.BACKBONE.PRETRAIN = False
    cfg.MODEL.BACKBONE.PRETRAIN_PATH = ""
    cfg.MODEL.HEADS.NUM_CLASSES = 3
    cfg.MODEL.WEIGHTS = ""
    cfg.INPUT.SIZE_TRAIN = [48, 16]  # 3 rows of features: MGN's 3 stripes
    cfg.INPUT.SIZE_TEST = [48, 16]
    return cfg


def test_configs_exist():
    assert len(CONFIGS) >= 4, f"no configs found under {CONFIG_DIR}"


def _check_model(cfg) -> str:
    torch.manual_seed(0)
    model = build_model(cfg, log_summary=False)
    model.train()
    batch = {
        "images": torch.randint(0, 256, (4, 3, 48, 16), dtype=torch.uint8),
        "targets": torch.tensor([0, 0, 2, 2]),
    }
    losses = model(batch)
    expected = {
        "CrossEntropyLoss": "loss_cls",
        "TripletLoss": "loss_triplet",
        "CircleLoss": "loss_circle",
        "Cosface": "loss_cosface",
        "FocalLoss": "loss_focal",
    }
    if cfg.MODEL.META_ARCHITECTURE == "MGN":  # one term per branch: loss_cls_b1, loss_triplet_b22, ...
        assert {k.rsplit("_", 1)[0] for k in losses} == {expected[n] for n in cfg.MODEL.LOSSES.NAME}
    else:
        assert set(losses) == {expected[n] for n in cfg.MODEL.LOSSES.NAME}
    total = sum(losses.values())
    assert math.isfinite(total.item())
    total.backward()
    no_grad = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    assert no_grad == []

    model.eval()
    with torch.no_grad():
        feats = model(batch)
    dim = cfg.MODEL.HEADS.EMBEDDING_DIM or cfg.MODEL.BACKBONE.FEAT_DIM
    if cfg.MODEL.META_ARCHITECTURE == "MGN":
        dim *= 8  # 8 heads' features concatenated
    assert feats.shape == (4, dim) and torch.isfinite(feats).all()
    return "ok"


@pytest.mark.slow
@pytest.mark.parametrize("path", CONFIGS, ids=[str(p.relative_to(CONFIG_DIR)) for p in CONFIGS])
def test_config_trains_and_evaluates(path):
    cfg = tiny_cfg(path)
    unsupported = (
        cfg.MODEL.META_ARCHITECTURE in UNSUPPORTED_META_ARCHS
        or cfg.MODEL.BACKBONE.NAME in UNSUPPORTED_BACKBONES
    )
    key = cfg.MODEL.dump()
    if key in _checked:
        assert _checked[key] == ("unsupported" if unsupported else "ok")
        return
    if unsupported:
        with pytest.raises(ConfigError, match="not supported yet"):
            build_model(cfg, log_summary=False)
        _checked[key] = "unsupported"
    else:
        _checked[key] = _check_model(cfg)
