"""The attribute model: upstream's weighted binary cross-entropy (written out here from its
definition), AttrHead's outputs and state-dict keys, AttrBaseline's training step and its errors."""

from __future__ import annotations

import math

import pytest
import torch

from fastreid.config import ConfigError, get_cfg
from fastreid.modeling import build_model
from fastreid.projects.attr import AttrBaseline, AttrHead, add_attr_config, cross_entropy_sigmoid_loss
from fastreid.projects.attr.modeling import ratio2weight


def _reference_loss(logits, targets, ratio=None):
    """Upstream's loss written element by element: BCE terms, times exp(1 - r) for a positive
    (label > 0.5) and exp(r) for a negative when weighted, summed over the non-zero terms."""
    total, count = 0.0, 0
    for i in range(logits.shape[0]):
        for j in range(logits.shape[1]):
            x, y = float(logits[i, j]), float(targets[i, j])
            p = 1 / (1 + math.exp(-x))
            term = -(y * math.log(p) + (1 - y) * math.log(1 - p))
            if ratio is not None:
                r = float(ratio[j])
                term *= math.exp(1 - r) if y > 0.5 else math.exp(r)
            total += term
            count += term != 0
    return total / max(count, 1)


def test_weighted_bce_is_upstreams():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(5, 4, generator=g, dtype=torch.float64)
    targets = (torch.rand(5, 4, generator=g) < 0.4).double()
    ratio = torch.tensor([0.1, 0.5, 0.8, 0.3], dtype=torch.float64)
    assert float(cross_entropy_sigmoid_loss(logits, targets, ratio)) == pytest.approx(
        _reference_loss(logits, targets, ratio), rel=1e-12
    )
    assert float(cross_entropy_sigmoid_loss(logits, targets)) == pytest.approx(
        _reference_loss(logits, targets), rel=1e-12
    )


def test_ratio2weight():
    targets = torch.tensor([[1.0, 0.0, 2.0]])
    weights = ratio2weight(targets, torch.tensor([0.25, 0.25, 0.25]))
    assert torch.allclose(weights[0, :2], torch.tensor([math.exp(0.75), math.exp(0.25)]))
    assert weights[0, 2] == 0  # labels above 1 weigh 0, as upstream


def _cfg(num_classes=6, **extra):
    cfg = get_cfg()
    add_attr_config(cfg)
    opts = {
        "MODEL.META_ARCHITECTURE": "AttrBaseline",
        "MODEL.HEADS.NAME": "AttrHead",
        "MODEL.HEADS.NUM_CLASSES": num_classes,
        "MODEL.HEADS.POOL_LAYER": "FastGlobalAvgPool",
        "MODEL.HEADS.WITH_BNNECK": True,
        "MODEL.LOSSES.NAME": ("BinaryCrossEntropyLoss",),
        "MODEL.BACKBONE.DEPTH": "18x",
        "MODEL.BACKBONE.FEAT_DIM": 512,
        "MODEL.BACKBONE.PRETRAIN": False,
        "MODEL.DEVICE": "cpu",
        **extra,
    }
    cfg.merge_from_list([x for kv in opts.items() for x in kv])
    return cfg


def test_attr_baseline_trains_and_scores(one_torch_thread):
    torch.manual_seed(0)
    model = build_model(_cfg(), log_summary=False)
    assert isinstance(model, AttrBaseline) and isinstance(model.heads, AttrHead)
    keys = set(model.heads.state_dict())
    assert {"weight", "bnneck.weight", "bnneck.running_mean", "bottleneck.0.weight"} <= keys
    assert model.heads.weight.shape == (6, 512)

    batch = {"images": torch.rand(4, 3, 32, 16) * 255, "targets": (torch.rand(4, 6) < 0.5).float()}
    model.train()
    losses = model(batch)
    assert set(losses) == {"loss_bce"} and torch.isfinite(losses["loss_bce"])
    model.sample_weights = torch.full((6,), 0.3)
    weighted = model(batch)["loss_bce"]
    weighted.backward()
    assert model.heads.weight.grad is not None

    model.eval()
    with torch.no_grad():
        scores = model(batch)
    assert scores.shape == (4, 6) and bool(((scores > 0) & (scores < 1)).all())


def test_attr_baseline_errors(one_torch_thread):
    with pytest.raises(ConfigError, match="BinaryCrossEntropyLoss"):
        build_model(_cfg(**{"MODEL.LOSSES.NAME": ("CrossEntropyLoss",)}), log_summary=False)
    model = build_model(_cfg(), log_summary=False).train()
    batch = {"images": torch.rand(2, 3, 32, 16) * 255, "targets": torch.tensor([0, 1])}
    with pytest.raises(ValueError, match="one label per attribute"):
        model(batch)
