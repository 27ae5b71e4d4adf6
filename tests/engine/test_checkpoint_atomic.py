"""Checkpoints are written atomically and carry the RNG states exact resume needs."""

import os
import random

import numpy as np
import pytest
import torch
from torch import nn

from fastreid.utils import checkpoint as ckpt
from fastreid.utils.checkpoint import Checkpointer
from fastreid.utils.rng import capture_rng_states, restore_rng_states


def _model(value: float) -> nn.Module:
    m = nn.Linear(3, 2)
    with torch.no_grad():
        m.weight.fill_(value)
    return m


def test_failed_write_leaves_previous_checkpoint_intact(tmp_path, monkeypatch):
    opt = torch.optim.SGD(_model(1.0).parameters(), lr=0.1)
    cp = Checkpointer(_model(1.0), str(tmp_path), optimizer=opt)
    cp.save("model_0000", iteration=3)
    good = (tmp_path / "model_0000.pth").read_bytes()

    real_save = torch.save

    def dying_save(obj, f, *args, **kwargs):
        real_save(obj, f, *args, **kwargs)
        f.truncate(10)  # half a file, then the process "dies"
        raise KeyboardInterrupt

    monkeypatch.setattr(ckpt.torch, "save", dying_save)
    cp2 = Checkpointer(_model(2.0), str(tmp_path), optimizer=opt)
    with pytest.raises(KeyboardInterrupt):
        cp2.save("model_0000", iteration=7)
    monkeypatch.undo()

    assert (tmp_path / "model_0000.pth").read_bytes() == good
    assert sorted(os.listdir(tmp_path)) == ["last_checkpoint", "model_0000.pth"]  # no temporary left
    fresh = _model(0.0)
    extra = Checkpointer(fresh, str(tmp_path)).resume_or_load("", resume=True)
    assert extra["iteration"] == 3
    assert torch.all(fresh.weight == 1.0)


def test_last_checkpoint_and_best_tagging(tmp_path):
    cp = Checkpointer(_model(1.0), str(tmp_path))
    cp.save("model_0001")
    cp.save("model_best", tag_as_last=False)
    assert (tmp_path / "last_checkpoint").read_text() == "model_0001.pth"
    assert cp.get_checkpoint_file().endswith("model_0001.pth")


def test_ddp_prefix_is_stripped_and_missing_weights_file_is_named(tmp_path):
    sd = {"module." + k: v for k, v in _model(5.0).state_dict().items()}
    torch.save({"model": sd}, tmp_path / "wrapped.pth")
    m = _model(0.0)
    Checkpointer(m).load(str(tmp_path / "wrapped.pth"))
    assert torch.all(m.weight == 5.0)
    with pytest.raises(FileNotFoundError, match="nope.pth not found; check MODEL.WEIGHTS"):
        Checkpointer(m).load(str(tmp_path / "nope.pth"))


def test_rng_states_round_trip_through_a_weights_only_file(tmp_path):
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    states = capture_rng_states()
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    torch.save({"rng": states}, tmp_path / "rng.pth")
    loaded = torch.load(tmp_path / "rng.pth", weights_only=True)["rng"]
    random.random(), np.random.rand(), torch.rand(1)
    restore_rng_states(loaded)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected
