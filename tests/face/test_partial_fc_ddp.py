"""Partial FC under DDP (gloo on the CPU, 127.0.0.1): 2 processes, each with half of the class
centres and half of every batch, train exactly as 1 process with all centres and whole batches
(sample rate 1.0, float64), through the family's own step (``PFCTrainer.run_step``); and the
centres' checkpoints written by 1 process load on 2 and the other way round."""

from __future__ import annotations

import os

import pytest
import torch
from gloo_ranks import run_ranks
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from fastreid.projects.face import PartialFC, PfcCheckpointer, PFCTrainer
from fastreid.utils.events import EventStorage

NUM_CLASSES = 7  # odd: the first process keeps 4 centres, the second 3
IN_DIM, EMB_DIM = 12, 8
GLOBAL_BATCH = 8
STEPS = 4
LR, MOMENTUM, WD = 0.2, 0.9, 5e-4


class TinyFace(nn.Module):
    """A model of the FaceBaseline-with-PFC shape: a batch in, (embeddings, targets) out. No
    BatchNorm, so a half batch per process computes what the whole batch does."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(IN_DIM, 16), nn.PReLU(16), nn.Linear(16, EMB_DIM))

    def forward(self, batch):
        return self.net(batch["images"]), batch["targets"]


def _data():
    g = torch.Generator().manual_seed(3)
    images = torch.randn(STEPS, GLOBAL_BATCH, IN_DIM, generator=g, dtype=torch.float64)
    targets = torch.randint(0, NUM_CLASSES, (STEPS, GLOBAL_BATCH), generator=g)
    return images, targets


def _initial():
    torch.manual_seed(0)
    model = TinyFace().double()
    centres = torch.randn(
        NUM_CLASSES, EMB_DIM, generator=torch.Generator().manual_seed(1), dtype=torch.float64
    )
    return model.state_dict(), centres


def _train(rank: int, world: int, sample_rate: float = 1.0):
    """Train STEPS steps on this process's share of each global batch; returns the model's
    state, the full centres and the losses."""
    model_state, centres = _initial()
    model = TinyFace().double()
    model.load_state_dict(model_state)
    if world > 1:
        model = DistributedDataParallel(model, broadcast_buffers=False)
    pfc = PartialFC(EMB_DIM, NUM_CLASSES, sample_rate, "CosSoftmax", 16.0, 0.2, dtype=torch.float64)
    pfc.load_full_state({"weight": centres, "momentum": torch.zeros_like(centres)})
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WD)
    pfc_optimizer = torch.optim.SGD([pfc.sub_weight], lr=LR, momentum=MOMENTUM, weight_decay=WD)
    images, targets = _data()
    share = GLOBAL_BATCH // world
    rows = slice(rank * share, (rank + 1) * share)
    batches = [{"images": images[s, rows], "targets": targets[s, rows]} for s in range(STEPS)]
    step = PFCTrainer(model, batches, optimizer, None, pfc, pfc_optimizer)
    losses = []
    with EventStorage(0) as storage:
        for i in range(STEPS):
            step.iter = storage.iter = i
            step.run_step()
            losses.append(storage.history("loss_cls").latest())
    inner = model.module if world > 1 else model
    return {k: v.detach().clone() for k, v in inner.state_dict().items()}, pfc.full_state(), losses, pfc


def _rank(rank: int, world: int, out: str) -> dict:
    model_state, full, losses, pfc = _train(rank, world)
    result = {
        "model": model_state,
        "centres": full["weight"],
        "momentum": full["momentum"],
        "losses": losses,
        "shard": (pfc.class_start, pfc.num_local),
    }
    # the centres written by these 2 processes, for 1 process to load
    PfcCheckpointer(pfc, os.path.join(out, "two"), save_to_disk=rank == 0).save("softmax_weight_final")
    # the centres written by 1 process (the parent), loaded by each of the 2
    loader = PartialFC(EMB_DIM, NUM_CLASSES, 1.0, "CosSoftmax", 16.0, 0.2, dtype=torch.float64)
    PfcCheckpointer(loader, os.path.join(out, "one")).resume_or_load("", resume=True)
    result["loaded_shard"] = loader.weight.clone()
    # sampled centres (rate 0.5) also train on 2 processes
    _, _, sampled_losses, _ = _train(rank, world, sample_rate=0.5)
    result["sampled_losses"] = sampled_losses
    return result


@pytest.mark.slow
def test_two_processes_train_as_one_and_checkpoints_are_interchangeable(tmp_path):
    torch.set_num_threads(1)
    one_model, one_full, one_losses, one_pfc = _train(0, 1)
    os.makedirs(tmp_path / "one")
    PfcCheckpointer(one_pfc, str(tmp_path / "one")).save("softmax_weight_final", iteration=STEPS - 1)

    ranks = run_ranks(_rank, 2, str(tmp_path))

    assert [r["shard"] for r in ranks] == [(0, 4), (4, 3)]
    # float64 through a few steps of SGD: the only differences are the order of sums over the
    # batch (all-reduce vs one matrix product), ~1e-16 relative per operation
    for rank in ranks:
        for key, value in one_model.items():
            torch.testing.assert_close(rank["model"][key], value, rtol=0, atol=1e-10, msg=key)
        torch.testing.assert_close(rank["centres"], one_full["weight"], rtol=0, atol=1e-10)
        torch.testing.assert_close(rank["momentum"], one_full["momentum"], rtol=0, atol=1e-10)
        assert rank["losses"] == pytest.approx(one_losses, abs=1e-10)
        assert all(torch.isfinite(torch.tensor(rank["sampled_losses"])))
    # the model moved: equality is not that of untouched weights
    start, centres = _initial()
    assert not torch.allclose(one_model["net.0.weight"], start["net.0.weight"])
    assert not torch.allclose(one_full["weight"], centres)
    assert one_losses[-1] < one_losses[0]

    # 1 process -> 2: each process took its own block
    torch.testing.assert_close(ranks[0]["loaded_shard"], one_full["weight"][:4], rtol=0, atol=0)
    torch.testing.assert_close(ranks[1]["loaded_shard"], one_full["weight"][4:], rtol=0, atol=0)
    # 2 processes -> 1: the file holds every centre
    loader = PartialFC(EMB_DIM, NUM_CLASSES, 1.0, "CosSoftmax", 16.0, 0.2, dtype=torch.float64)
    PfcCheckpointer(loader, str(tmp_path / "two")).resume_or_load("", resume=True)
    torch.testing.assert_close(loader.weight, ranks[0]["centres"], rtol=0, atol=0)
    torch.testing.assert_close(loader.weight_mom, ranks[0]["momentum"], rtol=0, atol=0)
