"""load_state_dict_with_report: readable tables for missing, unexpected and mis-shaped keys."""

import logging

import torch
from torch import nn

from fastreid.utils.checkpoint_report import load_state_dict_with_report


class Tiny(nn.Module):
    def __init__(self, classes=5):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.weight = nn.Parameter(torch.zeros(classes, 4))
        self.register_buffer("pixel_mean", torch.zeros(3), persistent=False)


def test_wrong_shapes_give_a_readable_report(caplog):
    model = Tiny(classes=5)
    state = Tiny(classes=9).state_dict()
    state["conv.weight"] = torch.ones(4, 3, 3, 3)
    del state["bn.running_var"]
    state["head.fc.weight"] = torch.zeros(2, 2)
    state["head.fc.bias"] = torch.zeros(2)
    state["pixel_mean"] = torch.ones(3)  # old checkpoints saved it; it is not part of the model state

    with caplog.at_level(logging.INFO):
        report = load_state_dict_with_report(model, state, logger=logging.getLogger("report-test"))

    assert not report.ok
    assert report.mismatched_keys == [("weight", (9, 4), (5, 4))]
    assert report.missing_keys == ["bn.running_var"]
    assert report.unexpected_keys == ["head.fc.weight", "head.fc.bias"]
    assert report.ignored_keys == ["pixel_mean"]
    assert torch.equal(model.conv.weight, torch.ones(4, 3, 3, 3))  # the rest is loaded
    assert torch.equal(model.weight, torch.zeros(5, 4))  # the mis-shaped tensor is skipped
    text = caplog.text
    assert "| shape mismatch | weight" in text and "checkpoint [9, 4] vs model [5, 4]" in text
    assert "head.fc.{weight,bias}" in text  # one line per module
    assert "| missing        | bn.running_var" in text
    assert "1 missing, 2 unexpected, 1 shape-mismatched" in text
    assert "pixel_mean" in text


def test_clean_load_logs_one_line(fr_log):
    model = Tiny()
    report = load_state_dict_with_report(model, Tiny().state_dict())
    assert report.ok and report.loaded_keys
    assert "Loaded all" in fr_log.text and "missing" not in fr_log.text


def test_long_lists_are_summarised(fr_log):
    model = nn.Sequential(*[nn.Linear(2, 2) for _ in range(30)])
    report = load_state_dict_with_report(model, {})
    assert len(report.missing_keys) == 60
    assert "... and 18 more modules" in fr_log.text
