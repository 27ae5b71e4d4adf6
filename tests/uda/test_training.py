"""ClusterContrast trained by the standard front door on the target's images: the pseudo labels of
each epoch in the log, metrics.json and the report; the labels and the memory in every checkpoint;
a run stopped mid-epoch, or killed after an epoch, resumes bit for bit; the target's identities
never change the weights; a clustering that cannot train stops with one line naming eps, after
saving what was trained."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import numpy as np
import pytest
import torch
from uda_helpers import REPO, train_argv

from fastreid.cli import train
from fastreid.data.datasets import Market1501
from fastreid.data.datasets.bases import Dataset
from fastreid.engine import HookBase, TrainingInterruptedError
from fastreid.projects.uda import ClusterContrast, ClusteringError, UdaTrainer, trainer
from fastreid.utils.checkpoint import Checkpointer
from fastreid.utils.reproducibility import set_seed


def weights(path) -> dict:
    return Checkpointer(torch.nn.Module()).read(str(path))["model"]


def assert_same_weights(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_the_run_logs_and_reports_each_epochs_pseudo_labels(uda_run):
    out = Path(uda_run["output"])
    lines = [json.loads(line) for line in (out / "metrics.json").read_text(encoding="utf-8").splitlines()]
    steps = [line for line in lines if "pseudo_labels/clusters" in line]
    assert [s["iteration"] for s in steps] == [0, 2]  # before each of the 2 epochs of 2 iterations
    for step in steps:
        assert step["pseudo_labels/clusters"] >= 4 and 0 <= step["pseudo_labels/outlier_share"] < 1
        assert {"pseudo_labels/NMI", "pseudo_labels/ARI", "pseudo_labels/pair_precision"} <= set(step)
    assert any("loss_contrast" in line for line in lines)
    assert {"Rank-1", "mAP"} <= set(uda_run["results"])
    log = (out / "log.txt").read_text(encoding="utf-8")
    assert "ClusterContrast trains with fastreid.projects.uda.trainer.UdaTrainer" in log
    assert "Pseudo labels for epoch 2:" in log and "clusters of" in log
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "Pseudo labels at each epoch" in page and "pair_precision" in page


def test_checkpoints_hold_the_labels_and_the_memory_and_the_model_is_a_baseline(uda_run, uda_cfg):
    saved = Checkpointer(torch.nn.Module()).read(os.path.join(uda_run["output"], "model_final.pth"))
    state = saved["trainer"]["hooks"]["PseudoLabelHook"]
    labels, memory = state["labels"].numpy(), state["memory"]
    assert state["epoch"] == 1 and len(labels) == state["num_images"] > 40
    assert memory.shape == (labels.max() + 1, 512)
    torch.testing.assert_close(memory.norm(dim=1), torch.ones(len(memory)))
    assert not any("memory" in key for key in saved["model"])
    # the weights are a plain Baseline's (the classifier aside): evaluation and features need nothing new
    cfg = uda_cfg(uda_run["output"], "MODEL.META_ARCHITECTURE", "Baseline")
    from fastreid.modeling import build_model

    baseline_keys = {k for k in build_model(cfg).state_dict() if k != "heads.weight"}
    assert baseline_keys == set(saved["model"]) - {"heads.weight"}


class _StopAfter(HookBase):
    """A stop signal (Ctrl-C) during the given iteration."""

    def __init__(self, iteration: int) -> None:
        self.iteration = iteration

    def after_step(self) -> None:
        if self.trainer.iter == self.iteration:
            self.trainer.stop_signals.signum = int(signal.SIGINT)


def _train(cfg, resume=False, hooks=()):
    set_seed(cfg.SEED)  # what default_setup does in fastreid-train
    t = UdaTrainer(cfg)
    t.resume_or_load(resume=resume)
    t.register_hooks(hooks)
    t.train()
    return t


@pytest.mark.slow
def test_stopped_mid_epoch_or_killed_after_an_epoch_resumes_bit_for_bit(uda_run, uda_cfg, tmp_path):
    # two tiny trainings (~10 s each on 2 cores): resuming needs runs to resume
    final = weights(os.path.join(uda_run["output"], "model_final.pth"))

    stopped = tmp_path / "stopped"
    with pytest.raises(TrainingInterruptedError):
        _train(uda_cfg(stopped), hooks=[_StopAfter(2)])  # the first iteration of epoch 2
    assert (stopped / "last_checkpoint").read_text() == "model_iter0000002.pth"
    resumed = _train(uda_cfg(stopped), resume=True)
    assert resumed.start_iter == 3
    assert_same_weights(weights(stopped / "model_final.pth"), final)

    killed = tmp_path / "killed"  # killed in epoch 2: its last checkpoint is epoch 1's
    killed.mkdir()
    shutil.copy(os.path.join(uda_run["output"], "model_0000.pth"), killed)
    (killed / "last_checkpoint").write_text("model_0000.pth")
    again = _train(uda_cfg(killed), resume=True)
    assert again.start_iter == 2
    assert_same_weights(weights(killed / "model_final.pth"), final)


def _scrambled_train_split(monkeypatch, seed: int) -> None:
    """Every Market1501 training record gets another record's identity (files, order and cameras
    as they are)."""
    original = Dataset.train.fget

    def scrambled(self):
        records = original(self)
        pids = np.random.default_rng(seed).permutation([r[1] for r in records])
        return [(r[0], pid, *r[2:]) for r, pid in zip(records, pids)]

    monkeypatch.setattr(Market1501, "train", property(scrambled))


def test_the_targets_identities_never_change_the_weights(uda_cfg, tmp_path, monkeypatch):
    # two runs of one clustering and one step each (~6 s on 2 cores): the smallest that trains
    tiniest = ["SOLVER.MAX_EPOCH", 1, "UDA.ITERS_PER_EPOCH", 1, "DATASETS.TESTS", (), "TEST.REPORT", False]
    plain = _train(uda_cfg(tmp_path / "plain", *tiniest))
    _scrambled_train_split(monkeypatch, seed=1)
    scrambled = _train(uda_cfg(tmp_path / "scrambled", *tiniest))
    assert plain.target.paths == scrambled.target.paths
    assert plain.target.identities != scrambled.target.identities  # the scramble reached the target
    assert_same_weights(
        weights(tmp_path / "plain" / "model_final.pth"), weights(tmp_path / "scrambled" / "model_final.pth")
    )
    np.testing.assert_array_equal(plain.pseudo_labels, scrambled.pseudo_labels)


@pytest.mark.slow
def test_a_clustering_that_cannot_train_is_one_line_and_keeps_what_was_trained(
    uda_data_root, tiny_resnet18_opts, tmp_path, monkeypatch, capsys
):
    # every image an outlier before the first epoch: one line naming eps, exit code 2
    argv = train_argv(
        tmp_path / "first", tiny_resnet18_opts, "UDA.CLUSTER.EPS", 0.01, "UDA.CLUSTER.MIN_SAMPLES", 10
    )
    assert train.run(argv) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("ClusteringError: epoch 1: DBSCAN at UDA.CLUSTER.EPS 0.01 (MIN_SAMPLES 10)"), last
    assert "left every image an outlier: raise UDA.CLUSTER.EPS" in last

    # before the second epoch, with no epoch checkpoint due: the first epoch is saved, then resumed
    # (three tiny runs, one of them of one clustering, ~15 s on 2 cores: what is tested is across runs)
    calls = []
    real = trainer.pseudo_labels

    def fails_the_second_time(*args, **kwargs):
        calls.append(1)
        result = real(*args, **kwargs)
        if len(calls) == 2:
            result.labels[:] = -1
            result.num_clusters = 0
        return result

    monkeypatch.setattr(trainer, "pseudo_labels", fails_the_second_time)
    out = tmp_path / "second"
    no_periodic = ["SOLVER.CHECKPOINT_PERIOD", 10, "UDA.ITERS_PER_EPOCH", 1, "DATASETS.TESTS", "()"]
    no_periodic += ["TEST.REPORT", False]
    assert train.run(train_argv(out, tiny_resnet18_opts, *no_periodic)) == 2
    assert "ClusteringError: epoch 2:" in capsys.readouterr().err
    assert (out / "last_checkpoint").read_text() == "model_iter0000000.pth"
    saved = Checkpointer(torch.nn.Module()).read(str(out / "model_iter0000000.pth"))
    assert saved["iteration"] == 0 and saved["trainer"]["hooks"]["PseudoLabelHook"]["epoch"] == 0
    assert train.run(train_argv(out, tiny_resnet18_opts, *no_periodic, resume=True)) == 0
    assert (out / "model_final.pth").is_file() and len(calls) == 3


def test_a_target_too_small_to_cluster_stops_before_training(uda_cfg, tmp_path):
    with pytest.raises(Exception, match="too few to cluster with UDA.CLUSTER.K1 500") as info:
        UdaTrainer(uda_cfg(tmp_path, "UDA.CLUSTER.K1", 500))
    assert "UDA.CLUSTER.EPS" in str(info.value) and not os.path.exists(tmp_path / "model_final.pth")
    assert isinstance(info.value, ClusteringError)


def test_the_family_is_registered_for_its_configs():
    from fastreid.config import get_cfg
    from fastreid.engine.trainers import trainer_for

    for name in sorted(os.listdir(os.path.join(REPO, "configs", "UDA"))):  # each shipped config loads
        cfg = get_cfg()
        cfg.merge_from_file(os.path.join(REPO, "configs", "UDA", name))
        family = "uda" if name != "demo_source.yml" and name != "demo_supervised.yml" else "reid"
        assert (trainer_for(cfg) is UdaTrainer) == (family == "uda"), name
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(REPO, "configs", "UDA", "cc_duke_R50.yml"))
    assert cfg.UDA.CLUSTER.EPS == 0.6 and cfg.UDA.MEMORY.MOMENTUM == 0.1 and cfg.UDA.MEMORY.TEMP == 0.05
    assert trainer_for(cfg) is UdaTrainer and ClusterContrast.__name__ == cfg.MODEL.META_ARCHITECTURE
