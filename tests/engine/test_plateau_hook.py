"""PlateauHook: counts evaluations without improvement, logs, lowers the LR, never below MIN_LR."""

import logging

import pytest
import torch
from torch import nn

from fastreid.engine.hooks import HookBase, PlateauHook
from fastreid.engine.train_loop import TrainerBase


class _FakeEval(HookBase):
    def __init__(self, values):
        self.values = list(values)

    def after_epoch(self):
        self.trainer.storage.put_scalar("metric", self.values[self.trainer.epoch], smoothing_hint=False)


class _Loop(TrainerBase):
    def __init__(self, optimizer):
        super().__init__()
        self.optimizer = optimizer
        self.lrs = []

    def run_step(self):
        self.lrs.append(self.optimizer.param_groups[0]["lr"])


@pytest.fixture(autouse=True)
def _propagate_fastreid_logs(monkeypatch):
    # setup_logger() elsewhere in the session stops "fastreid" records reaching caplog's root handler
    monkeypatch.setattr(logging.getLogger("fastreid"), "propagate", True)


def _run(values, **kw):
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    loop = _Loop(opt)
    hook = PlateauHook(opt, **kw)
    loop.register_hooks([_FakeEval(values), hook])
    loop.train(0, len(values), 1)
    return loop.lrs, hook


def test_lowers_lr_after_patience_evaluations(caplog):
    with caplog.at_level(logging.WARNING, logger="fastreid"):
        lrs, hook = _run([10, 12, 11, 11.5, 11, 13, 13], patience=2, factor=0.5, min_lr=0.1)
    # 11 and 11.5 do not beat 12: LR halves before epoch 4; 11 then 13 (a new best) change nothing
    assert lrs == [1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5]
    assert hook.best == 13 and hook.num_reductions == 1
    assert any("metric has not improved for 2 evaluations" in r.message for r in caplog.records)


def test_never_below_min_lr():
    lrs, _ = _run([5, 5, 5, 5, 5], patience=1, factor=0.5, min_lr=0.3)
    assert lrs == [1.0, 1.0, 0.5, 0.3, 0.3]


def test_factor_one_only_logs(caplog):
    with caplog.at_level(logging.WARNING, logger="fastreid"):
        lrs, hook = _run([5, 4, 4, 4], patience=2, factor=1.0)
    assert lrs == [1.0] * 4 and hook.num_reductions == 0
    assert any("FACTOR < 1 would lower the LR" in r.message for r in caplog.records)


def test_state_round_trip_and_validation():
    _, hook = _run([1, 3, 2], patience=5, factor=0.5)
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    other = PlateauHook(opt, patience=5, factor=0.5)
    other.load_state_dict(hook.state_dict())
    assert (other.best, other.num_bad_evals, other.best_iter) == (3, 1, 1)
    with pytest.raises(ValueError, match="PATIENCE must be >= 1"):
        PlateauHook(opt, patience=0)
