"""fastreid.solver.optim: LAMB and RAdam against upstream's own optimizers on the same steps
(``data/upstream_optim.pt``, written by ``data/make_upstream_optim.py``), and the SWA wrapper."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

from fastreid.solver.optim import SWA, Lamb, PlainRAdam, RAdam
from fastreid.solver.optim.lamb import log_lamb_rs

sys.path.insert(0, str(Path(__file__).parent / "data"))
from make_upstream_optim import CASES, run

REFERENCE = torch.load(
    os.path.join(os.path.dirname(__file__), "data", "upstream_optim.pt"), weights_only=True
)
OURS = {"lamb": Lamb, "lamb_adam": Lamb, "radam": RAdam}


# torch's RAdam adds eps after the bias correction of the second moment, upstream's before it: the
# updates differ by ~eps / sqrt(v) of themselves (measured 1.4e-7 relative after 7 steps). A wrong
# learning rate, beta or weight decay moves the parameters by 1e-3 or more.
TOLERANCE = {"lamb": 1e-12, "lamb_adam": 1e-12, "radam": 1e-5}


@pytest.mark.parametrize("name", sorted(CASES))
def test_steps_match_upstreams_optimizer(name):
    _, _, kwargs = CASES[name]
    tol = TOLERANCE[name]
    torch.testing.assert_close(run(OURS[name], kwargs), REFERENCE[name], rtol=tol, atol=tol)
    # and a planted mistake is caught: another weight decay
    wrong = run(OURS[name], {**kwargs, "weight_decay": 0.05})
    assert not torch.allclose(wrong, REFERENCE[name], rtol=tol, atol=tol)


def test_plain_radam_is_radam():
    torch.testing.assert_close(run(PlainRAdam, {"lr": 0.01}), run(RAdam, {"lr": 0.01}), rtol=0, atol=0)


def test_lamb_logs_its_trust_ratios():
    class Writer:
        def __init__(self):
            self.histograms = {}

        def add_histogram(self, tag, values, step):
            self.histograms[tag] = values

    p = torch.nn.Parameter(torch.ones(3))
    opt = Lamb([p], lr=0.1)
    p.grad = torch.ones(3)
    opt.step()
    writer = Writer()
    log_lamb_rs(opt, writer, 1)
    assert set(writer.histograms) == {"lamb/weight_norm", "lamb/adam_norm", "lamb/trust_ratio"}
    with pytest.raises(ValueError, match="Invalid beta"):
        Lamb([p], betas=(1.0, 0.9))


def test_swa_averages_the_parameters_and_swaps_them():
    p = torch.nn.Parameter(torch.zeros(2))
    swa = SWA(torch.optim.SGD([p], lr=1.0), swa_freq=1)
    seen = []
    for _ in range(4):
        swa.zero_grad()
        p.grad = torch.full((2,), -1.0)  # p goes 1, 2, 3, 4
        swa.step()
        seen.append(p.detach().clone())
    swa.swap_swa_param()
    torch.testing.assert_close(p.detach(), torch.stack(seen).mean(0))  # 2.5: the average of the 4 steps
    state = swa.state_dict()
    again = SWA(torch.optim.SGD([p], lr=1.0), swa_freq=1)
    again.load_state_dict(state)
    assert torch.equal(again.state[p]["swa_buffer"], swa.state[p]["swa_buffer"])
    manual = SWA(torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1), swa_lr_factor=0.5)
    manual.reset_lr_to_swa()
    assert manual.param_groups[0]["initial_lr"] == pytest.approx(0.05)
