"""The engine behaves as upstream FastReID's on the scenarios of ``upstream_scenarios.py``: the
training step and the LR schedule hooks (warmup ending on an epoch boundary, a delayed epoch
schedule, SWA), the order of hook calls, when evaluation runs, precise BN run without a trainer,
what ``PeriodicCheckpointer`` saves, the load messages, and a checkpoint upstream's
``Checkpointer`` wrote. References: ``data/upstream_engine.json``, written by
``data/make_upstream_reference.py`` from upstream's code.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch
import upstream_scenarios as scenarios

from fastreid.engine import hooks, train_loop
from fastreid.utils import checkpoint

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
with open(os.path.join(DATA, "upstream_engine.json"), encoding="utf-8") as _f:
    REFERENCE = json.load(_f)


def assert_close(ours, theirs, rel=1e-12):
    """float64 values equal up to rounding, relative to the largest magnitude."""
    ours, theirs = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    assert ours.shape == theirs.shape
    scale = max(1.0, float(np.abs(theirs).max(initial=0.0)))
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=rel * scale)


@pytest.mark.parametrize("swa", [False, True], ids=["warmup-and-steps", "swa"])
def test_training_step_and_lr_schedule_hooks(swa):
    got = scenarios.training_schedule(train_loop, hooks, swa=swa)
    expected = REFERENCE["training"]["swa" if swa else "plain"]
    assert_close(got["lrs"], expected["lrs"])
    assert_close(got["losses"], expected["losses"], rel=1e-10)
    assert_close(got["weight"], expected["weight"], rel=1e-10)
    assert_close(got["bias"], expected["bias"], rel=1e-10)


def test_hook_call_order():
    assert scenarios.hook_order(train_loop, hooks) == REFERENCE["hook_order"]


@pytest.mark.parametrize("case", sorted(REFERENCE["evaluation_epochs"]))
def test_evaluation_runs_after_the_same_epochs(case):
    max_epoch, period = map(int, case.split("/"))
    assert (
        scenarios.evaluation_epochs(train_loop, hooks, max_epoch, period)
        == REFERENCE["evaluation_epochs"][case]
    )


def test_precise_bn_without_a_trainer():
    """The same batches and marks and the same means. The variance is fvcore's estimate (the
    variance of all the samples together, fvcore >= 0.1.5), where upstream's copy of the older
    fvcore averages the per-batch variances; both estimate the same population variance, fvcore's
    better for small batches."""
    got = scenarios.precise_bn_statistics(hooks)
    expected = REFERENCE["precise_bn"]
    assert got["targets_seen"] == expected["targets_seen"]  # marked as a precise-BN pass
    assert_close(got["running_mean"], expected["running_mean"], rel=1e-12)
    assert_close(expected["running_var"], expected["mean_of_batch_vars"], rel=1e-12)
    assert_close(got["running_var"], got["population_var"], rel=1e-12)


@pytest.mark.parametrize("case", REFERENCE["periodic_saves"], ids=lambda c: f"period-{c['period']}")
def test_periodic_checkpointer_saves_what_upstream_saves(case):
    metrics = case["metrics"]
    assert scenarios.periodic_saves(checkpoint, case["period"], len(metrics), metrics) == case["saves"]


@pytest.mark.parametrize("mode", ["colour", "plain"])
def test_load_messages(mode):
    with scenarios.termcolor_mode(mode):
        assert scenarios.load_messages(checkpoint) == REFERENCE["messages"][mode]


def test_a_checkpoint_upstream_wrote_loads_with_its_optimizer_state(tmp_path):
    upstream = scenarios.from_json(REFERENCE["checkpoint"])  # what upstream's Checkpointer.save wrote
    path = tmp_path / "upstream" / "model_0001.pth"
    path.parent.mkdir()
    torch.save(upstream, path)
    model = scenarios.TinyRegressor(seed=0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    extra = checkpoint.Checkpointer(model, optimizer=optimizer).load(str(path))
    assert extra == {"epoch": 1, "metric": 42.5}
    assert torch.equal(model.linear.weight, upstream["model"]["linear.weight"])
    momentum = optimizer.state_dict()["state"][0]["momentum_buffer"]
    assert torch.equal(momentum, upstream["optimizer"]["state"][0]["momentum_buffer"])
    # and ours in upstream's layout: model, one entry per checkpointable, the extra data
    checkpoint.Checkpointer(model, str(tmp_path), optimizer=optimizer).save(
        "model_0001", epoch=1, metric=42.5
    )
    written = torch.load(tmp_path / "model_0001.pth", weights_only=True)
    assert list(written) == list(upstream) and list(written["model"]) == list(upstream["model"])
    assert written["optimizer"]["param_groups"] == upstream["optimizer"]["param_groups"]
