"""Hooks upstream has and this package now provides (profiler, SWA state, PreciseBN as upstream's
projects call it), the trainers' upstream signatures, and the checkpointer's updates: the state
written after a checkpoint, bound to that checkpoint's bytes."""

from __future__ import annotations

import itertools
import json
import os

import pytest
import torch
import upstream_scenarios as scenarios
from torch import nn

from fastreid.engine import hooks
from fastreid.engine.train_loop import AMPTrainer, SimpleTrainer, TrainerBase
from fastreid.utils.checkpoint import Checkpointer, remove_checkpoint, update_path
from fastreid.utils.checksum import checksum_path


def _trainer(hook_list, epochs=2, iters_per_epoch=3):
    model = scenarios.TinyRegressor()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    trainer = SimpleTrainer(model, itertools.cycle(scenarios._batches(seed=3)), optimizer, None)
    trainer.register_hooks(hook_list)
    trainer.train(0, epochs, iters_per_epoch)
    return trainer


def test_autograd_profiler_writes_a_chrome_trace_per_chosen_iteration(tmp_path):
    profiler = hooks.AutogradProfiler(lambda t: t.iter in (1, 4), str(tmp_path / "traces"), use_cuda=False)
    _trainer([profiler])
    names = sorted(os.listdir(tmp_path / "traces"))
    assert names == ["profiler-trace-iter1.json", "profiler-trace-iter4.json"]
    trace = json.loads((tmp_path / "traces" / names[0]).read_text())
    assert trace["traceEvents"]  # events of the step: the forward's linear layer among them
    assert any("linear" in str(e.get("name", "")).lower() for e in trace["traceEvents"])


class _KilledError(Exception):
    pass


class _KillAfter(hooks.HookBase):
    def __init__(self, iteration):
        self.iteration = iteration

    def after_step(self):
        if self.trainer.iter == self.iteration:
            raise _KilledError


def test_swa_state_round_trips_and_a_resumed_average_matches():
    """A run resumed from the SWA hook's state (and the model's and optimizer's) ends with the
    same averaged weights as one that was not interrupted."""
    full = _trainer([hooks.SWA(2, 2, 0.5, 0.001, lr_sched=True)], epochs=3)

    batches = scenarios._batches(seed=3)
    first = hooks.SWA(2, 2, 0.5, 0.001, lr_sched=True)
    model = scenarios.TinyRegressor()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    killed = SimpleTrainer(model, itertools.cycle(batches), optimizer, None)
    killed.register_hooks([first, _KillAfter(4)])
    with pytest.raises(_KilledError):
        killed.train(0, 3, 3)
    state = first.state_dict()
    assert int(state["averaged"]["n_averaged"]) == 1 and "scheduler" in state  # after iteration 3

    model2 = scenarios.TinyRegressor()
    model2.load_state_dict(model.state_dict())
    optimizer2 = torch.optim.SGD(model2.parameters(), lr=0.01, momentum=0.9)
    optimizer2.load_state_dict(optimizer.state_dict())
    resumed = SimpleTrainer(model2, itertools.cycle(batches[5:] + batches[:5]), optimizer2, None)
    second = hooks.SWA(2, 2, 0.5, 0.001, lr_sched=True)
    resumed.register_hooks([second])
    second.load_state_dict(state)
    assert optimizer2.param_groups[0]["lr"] == optimizer.param_groups[0]["lr"]
    resumed.train(0, 3, 3, start_iter=5)
    assert torch.allclose(model2.linear.weight, full.model.linear.weight, rtol=0, atol=1e-12)
    assert not torch.allclose(model2.linear.weight, model.linear.weight)


def test_precise_bn_as_upstreams_projects_call_it():
    """PartialReID's --eval-only: ``hooks.PreciseBN(model, loader, num_iter).update_stats()``,
    guarded by ``hooks.get_bn_modules(model)``; a model without BN in training mode is left alone."""
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    assert hooks.get_bn_modules(model)
    loader = [torch.randn(5, 3) + 3.0 for _ in range(3)]
    hooks.PreciseBN(model, loader, 3).update_stats()
    assert model[1].running_mean.abs().sum() > 0
    model.eval()
    assert hooks.get_bn_modules(model) == []
    before = model[1].running_mean.clone()
    hooks.PreciseBN(model, loader, 3).update_stats()  # disabled: logs and does nothing
    assert torch.equal(model[1].running_mean, before)
    with pytest.raises(ValueError, match="data_loader or a data_loader_factory"):
        hooks.PreciseBN(model, None, 3)


def test_trainers_take_upstreams_arguments():
    model = scenarios.TinyRegressor()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    class Wrapper:
        checks = 0

        def assert_buffer_is_valid(self):  # upstream's ContiguousParams
            Wrapper.checks += 1

    simple = SimpleTrainer(model, itertools.cycle(scenarios._batches(seed=3)), optimizer, Wrapper())
    simple.train(0, 1, 2)
    assert Wrapper.checks == 2
    amp = AMPTrainer(model, [], optimizer, None, None)
    assert amp.grad_scaler is None and amp.amp_dtype is torch.bfloat16  # on the CPU
    assert isinstance(next(iter(simple.storage.histories())), str)


def test_trainer_base_epoch_range_and_setters():
    class Loop(TrainerBase):
        def run_step(self):
            self.seen.append(self.iter)

    loop = Loop()
    loop.seen = []
    loop.train(1, 3, 2)  # upstream's arguments: epochs 1 and 2 of 2 iterations
    assert loop.seen == [2, 3, 4, 5] and (loop.start_epoch, loop.max_epoch) == (1, 3)
    loop.seen = []
    loop.train(0, 3, 2, start_iter=3, max_iter=5)  # mid-epoch resume, MAX_ITER
    assert loop.seen == [3, 4]
    loop.iters_per_epoch = 4
    loop.max_epoch = 6
    loop.start_epoch = 2
    assert (loop.max_iter, loop.start_iter) == (24, 8)


def test_callback_hook_drops_its_functions_after_training():
    calls = []
    hook = hooks.CallbackHook(after_step=lambda t: calls.append(t.iter))
    _trainer([hook], epochs=1, iters_per_epoch=2)
    assert calls == [0, 1]
    assert all(f is None for f in hook._callbacks.values())


# ------------------------------------------------------------------------------ checkpointer


def _linear(value):
    m = nn.Linear(2, 2)
    with torch.no_grad():
        m.weight.fill_(value)
    return m


def test_an_update_replaces_entries_without_writing_the_checkpoint_again(tmp_path):
    cp = Checkpointer(_linear(1.0), str(tmp_path))
    cp.save("model_final", iteration=9, trainer={"hooks": {"EvalHook": {"last_eval_iter": 3}}})
    path = str(tmp_path / "model_final.pth")
    before = os.stat(path).st_mtime_ns
    cp.save_update("model_final", trainer={"hooks": {"EvalHook": {"last_eval_iter": 9}}})
    assert os.stat(path).st_mtime_ns == before
    assert os.path.isfile(update_path(path)) and os.path.isfile(checksum_path(update_path(path)))
    read = cp.read(path)
    assert read["trainer"]["hooks"]["EvalHook"]["last_eval_iter"] == 9 and read["iteration"] == 9
    fresh = _linear(0.0)
    extra = Checkpointer(fresh, str(tmp_path)).resume_or_load("", resume=True)
    assert extra["trainer"]["hooks"]["EvalHook"]["last_eval_iter"] == 9
    assert torch.all(fresh.weight == 1.0)


def test_a_new_checkpoint_drops_the_old_ones_update_and_a_foreign_update_is_ignored(tmp_path, fr_log):
    cp = Checkpointer(_linear(1.0), str(tmp_path))
    cp.save("model_final", note="first")
    cp.save_update("model_final", note="updated")
    path = str(tmp_path / "model_final.pth")
    update = update_path(path)
    with open(update, "rb") as f:
        kept = f.read()
    cp.save("model_final", note="second")  # a new file: its old update goes first
    assert not os.path.exists(update)
    assert cp.read(path)["note"] == "second"
    with open(update, "wb") as f:  # an update left over from another version of the file
        f.write(kept)
    assert cp.read(path)["note"] == "second"
    assert "belongs to another version" in fr_log.text
    remove_checkpoint(path)
    assert sorted(os.listdir(tmp_path)) == ["last_checkpoint"]


def test_write_is_the_one_writer(tmp_path):
    path = str(tmp_path / "clean.pth")
    Checkpointer.write(path, {"model": {"w": torch.ones(2)}})
    assert sorted(os.listdir(tmp_path)) == ["clean.pth", "clean.pth.sha256"]
    model = nn.Module()
    model.w = nn.Parameter(torch.zeros(2))
    Checkpointer(model).load(path)
    assert torch.equal(model.w.data, torch.ones(2))
