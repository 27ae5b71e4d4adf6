"""The overhaul distillation loss and margins against upstream's own code
(data/make_upstream_reference.py ran upstream's overhaul.py on overhaul_cases.make_case(), in
float64), and the partial L2 distance element by element."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from overhaul_cases import STUDENT_CHANNELS, TEACHER_CHANNELS, make_case  # tests/distill, on the path
from torch import nn

from fastreid.projects.distill import build_feature_connector, distillation_loss, get_margin_from_BN
from fastreid.projects.distill.overhaul import overhaul_loss

REFERENCE = os.path.join(os.path.dirname(__file__), "data", "upstream_overhaul.npz")


def _bn(weight: np.ndarray, bias: np.ndarray) -> nn.BatchNorm2d:
    bn = nn.BatchNorm2d(len(weight))
    bn.weight.data = torch.from_numpy(weight).float()
    bn.bias.data = torch.from_numpy(bias).float()
    return bn


def test_the_margins_are_upstreams():
    ref = np.load(REFERENCE)
    case = make_case()
    for i in range(len(case["t_feats"])):
        for j in range(4):
            margin = get_margin_from_BN(_bn(case["bn_weight"][i][j], case["bn_bias"][i][j]))
            assert margin.dtype == torch.float32
            # float64 formula rounded to float32 on both sides (scipy's ndtr here erfc): 1 ulp at most
            np.testing.assert_allclose(margin.numpy(), ref[f"margin{i}_{j + 1}"], rtol=2e-7, atol=1e-7)
    bn = _bn(np.array([1.0, 1.0, 0.0, 0.0]), np.array([5.0, -0.5, -0.7, 0.4]))
    assert get_margin_from_BN(bn)[0] == pytest.approx(-3.0)  # Phi(-5) <= 0.001: -3 s
    assert get_margin_from_BN(bn)[2:].tolist() == pytest.approx([-0.7, 0.0])  # s = 0: a constant channel


def test_the_loss_is_upstreams():
    ref = np.load(REFERENCE)
    case = make_case()
    model = nn.Module()
    for i in range(len(case["t_feats"])):
        connectors = nn.ModuleList(
            build_feature_connector(t, s) for t, s in zip(TEACHER_CHANNELS, STUDENT_CHANNELS)
        )
        for j in range(4):
            connectors[j][0].weight.data = torch.from_numpy(ref[f"connector{i}_{j}"])
            model.register_buffer(
                f"margin{i}_{j + 1}", torch.from_numpy(ref[f"margin{i}_{j + 1}"])[None, :, None, None]
            )
        setattr(model, f"connectors_{i}", connectors.double().train())
    s_feats = [torch.from_numpy(f) for f in case["s_feats"]]
    t_feats = [[torch.from_numpy(f) for f in feats] for feats in case["t_feats"]]
    loss = overhaul_loss(model, s_feats, t_feats) / len(s_feats[0])  # upstream divides by the batch size too
    assert loss.dtype == torch.float64
    assert float(loss) == pytest.approx(float(ref["loss_overhaul"]), rel=1e-9, abs=1e-6)


def test_the_partial_l2_distance_element_by_element():
    source = torch.tensor([[[[0.5, -2.0, -0.1, 1.0]]]])
    target = torch.tensor([[[[-3.0, -3.0, -3.0, 2.0]]]])
    margin = torch.tensor([[[[-1.0]]]])
    # targets become max(t, -1) = (-1, -1, -1, 2); counted: s > t' (0.5, -0.1) or t' > 0 (the last)
    expected = (0.5 + 1) ** 2 + (-0.1 + 1) ** 2 + (1.0 - 2.0) ** 2
    assert float(distillation_loss(source, target, margin)) == pytest.approx(expected)


def test_a_connector_is_upstreams_structure():
    c = build_feature_connector(12, 4)
    assert set(c.state_dict()) >= {"0.weight", "1.weight", "1.bias", "1.running_mean"}
    assert c[0].weight.shape == (12, 4, 1, 1) and c[0].bias is None
    assert torch.equal(c[1].weight, torch.ones(12)) and torch.equal(c[1].bias, torch.zeros(12))
