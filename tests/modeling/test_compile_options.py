"""MODEL.COMPILE keeps checkpoints compatible; MODEL.CHANNELS_LAST: auto is channels-last on the CPU."""

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


def test_defaults_do_not_compile():
    model = tiny_model()
    assert apply_model_options(get_cfg(), model) is model
    assert not getattr(model, "_compiled_call_impl", None)


@pytest.mark.parametrize(("value", "channels_last"), [("auto", True), (True, True), (False, False)])
def test_channels_last_on_cpu(value, channels_last, caplog):
    cfg = get_cfg()
    cfg.MODEL.CHANNELS_LAST = value
    cfg.MODEL.PRECISION = "fp32"  # the memory format alone, on any CPU
    model = tiny_model()
    with caplog.at_level(logging.INFO, logger="fastreid.modeling.compile"):
        apply_model_options(cfg, model)
    weight = model[0].weight
    assert weight.is_contiguous(memory_format=torch.channels_last) is channels_last
    assert weight.is_contiguous() is not channels_last
    assert ("channels-last" in caplog.text) is channels_last


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
