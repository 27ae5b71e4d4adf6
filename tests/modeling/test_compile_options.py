"""MODEL.COMPILE keeps checkpoints compatible; MODEL.CHANNELS_LAST is CUDA-only."""

import logging

import pytest
import torch
from torch import nn

from fastreid.config import get_cfg
from fastreid.modeling.compile import apply_model_options


def tiny_model():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten()
    )


def test_defaults_leave_the_model_alone():
    model = tiny_model()
    assert apply_model_options(get_cfg(), model) is model
    assert not getattr(model, "_compiled_call_impl", None)


def test_channels_last_is_ignored_on_cpu_with_a_log_line(caplog):
    cfg = get_cfg()
    cfg.MODEL.CHANNELS_LAST = True
    model = tiny_model()
    with caplog.at_level(logging.INFO, logger="fastreid.modeling.compile"):
        apply_model_options(cfg, model)
    assert model[0].weight.is_contiguous()
    assert "only helps convolutions on CUDA" in caplog.text


@pytest.mark.slow
def test_compile_keeps_state_dict_keys_and_outputs():
    cfg = get_cfg()
    cfg.MODEL.COMPILE = True
    cfg.MODEL.COMPILE_BACKEND = "aot_eager"  # the same graph capture without generating C++ (minutes here)
    plain, compiled = tiny_model().eval(), tiny_model().eval()
    apply_model_options(cfg, compiled)
    assert list(compiled.state_dict()) == list(plain.state_dict())  # no _orig_mod. prefix
    x = torch.randn(2, 3, 8, 6)
    torch.testing.assert_close(compiled(x), plain(x), rtol=1e-4, atol=1e-5)
