"""Training on a tiny synthetic Market-1501 with a tiny ResNet-18: loader modes give the same
losses, an interrupted run resumes bit-identically, NaN stops training, --eval-only reproduces the
final evaluation, AMP and layer freezing work, and a 2-process gloo DDP run trains and evaluates."""

from __future__ import annotations

import json
import os
import sys

import pytest
import torch

from fastreid.config import get_cfg
from fastreid.engine import (
    DefaultTrainer,
    HookBase,
    NonFiniteLossError,
    SimpleTrainer,
    default_argument_parser,
)
from fastreid.utils.precision import forced_cpu
from fastreid.utils.reproducibility import set_seed

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(REPO, "tools")

# CPU facts for the precision decision (fastreid/utils/precision.py), forced in one test.
NATIVE_BF16 = {
    "bf16_features": ("avx512_bf16",),
    "arch": "x86_64",
    "aten_capability": "AVX512",
    "onednn": True,
    "onednn_bf16": True,
    "onednn_isa_cap": None,
}
AVX2_ONLY = {**NATIVE_BF16, "bf16_features": (), "aten_capability": "AVX2", "onednn_bf16": False}

# What these tests train with, on top of the shared tiny ResNet-18 options.
TRAINING = [
    "INPUT.PADDING.SIZE",
    4,
    "INPUT.REA.ENABLED",
    True,  # random erasing: augmentation randomness must be reproducible
    "SOLVER.AMP.ENABLED",
    False,
    "SOLVER.IMS_PER_BATCH",
    8,
    "SOLVER.WARMUP_ITERS",
    3,
    "SOLVER.MAX_EPOCH",
    3,
    "SOLVER.STEPS",
    [1],
    "SOLVER.CHECKPOINT_PERIOD",
    1,
    "SOLVER.LOG_PERIOD",
    5,
    "TEST.EVAL_PERIOD",
    0,
    "TEST.IMS_PER_BATCH",
    32,
    "CUDNN_BENCHMARK",
    False,
    "TEST.REPORT",  # half a tiny run's CPU (its charts); tests/report writes and checks it
    False,
]


@pytest.fixture(scope="module")
def data_root(synthetic_market_root, one_torch_thread):
    """The shared synthetic Market-1501 as FASTREID_DATASETS, one torch thread, for this module."""
    root = synthetic_market_root
    old = os.environ.get("FASTREID_DATASETS")
    os.environ["FASTREID_DATASETS"] = root
    yield root
    if old is None:
        os.environ.pop("FASTREID_DATASETS", None)
    else:
        os.environ["FASTREID_DATASETS"] = old


@pytest.fixture
def tiny_cfg(data_root, tiny_resnet18_opts):
    """``tiny_cfg(output_dir, *overrides)``: the bag-of-tricks config with the tiny ResNet-18, the
    training options above and ``overrides``, on the shared synthetic data set."""

    return lambda output_dir, *overrides: _training_cfg(tiny_resnet18_opts, output_dir, *overrides)


def _training_cfg(tiny_resnet18_opts, output_dir, *overrides):
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(REPO, "configs", "Base-bagtricks.yml"))
    cfg.merge_from_list([*tiny_resnet18_opts, *TRAINING, "OUTPUT_DIR", str(output_dir), *overrides])
    return cfg


def losses_of(trainer):
    """The total losses of the iterations this trainer ran (a resumed run's storage also holds the
    recent ones before its checkpoint, for the writers' windowed medians)."""
    return [v for v, itr in trainer.storage.history("total_loss").values() if itr >= trainer.start_iter]


def run_training(cfg, resume=False, extra_hooks=(), trainer_cls=DefaultTrainer):
    set_seed(cfg.SEED)
    trainer = trainer_cls(cfg)
    trainer.resume_or_load(resume=resume)
    trainer.register_hooks(extra_hooks)
    results = trainer.train()
    return trainer, results


class _SimulatedKillError(Exception):
    pass


class _InterruptAt(HookBase):
    def __init__(self, iteration):
        self.iteration = iteration

    def after_step(self):
        if self.trainer.iter == self.iteration:
            raise _SimulatedKillError(f"simulated kill at iteration {self.iteration}")


@pytest.fixture(scope="module")
def full_run(data_root, tiny_resnet18_opts, tmp_path_factory):
    """``(OUTPUT_DIR, trainer, results)`` of one uninterrupted two-epoch run with its final
    evaluation: the reference of the resume test, the weights of the --eval-only test."""
    out = tmp_path_factory.mktemp("full")
    trainer, results = run_training(_training_cfg(tiny_resnet18_opts, out, "SOLVER.MAX_EPOCH", 2))
    return out, trainer, results


@pytest.mark.slow
def test_resume_after_interruption_is_bit_identical(tiny_cfg, tmp_path, full_run):
    _, full, full_results = full_run
    reference = losses_of(full)
    ipe = full.iters_per_epoch
    assert ipe >= 4 and len(reference) == 2 * ipe
    assert {"Rank-1", "mAP", "metric"} <= set(full_results)

    out = tmp_path / "interrupted"
    with pytest.raises(_SimulatedKillError):
        run_training(tiny_cfg(out, "SOLVER.MAX_EPOCH", 2), extra_hooks=[_InterruptAt(ipe)])  # in epoch 1
    assert (out / "last_checkpoint").read_text() == "model_0000.pth"  # saved after epoch 0

    resumed, resumed_results = run_training(tiny_cfg(out, "SOLVER.MAX_EPOCH", 2), resume=True)
    assert resumed.start_iter == ipe
    assert losses_of(resumed) == reference[ipe:]  # exact equality, not approx
    restored = [v for v, itr in resumed.storage.history("total_loss").values() if itr < ipe]
    assert restored and restored == reference[:ipe][-len(restored) :]  # the writers' window, put back
    assert resumed_results["Rank-1"] == full_results["Rank-1"]
    assert resumed_results["mAP"] == full_results["mAP"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "mode",
    [
        ["DATALOADER.NUM_WORKERS", 2, "DATALOADER.MP_CONTEXT", "spawn"],
        ["DATALOADER.NUM_WORKERS", 0, "DATALOADER.NUM_THREADS", 2],
    ],
    ids=["2-spawn-workers", "2-threads"],
)
def test_loader_modes_give_the_same_losses(tiny_cfg, tmp_path, mode, zero_worker_losses):
    other, _ = run_training(tiny_cfg(tmp_path / "other", *LOADER_RUN, *mode), trainer_cls=_NoEvalTrainer)
    assert len(zero_worker_losses) == 4
    assert losses_of(other) == zero_worker_losses


LOADER_RUN = ["SOLVER.MAX_ITER", 4, "TEST.EVAL_PERIOD", 100]


@pytest.fixture(scope="module")
def zero_worker_losses(data_root, tiny_resnet18_opts, tmp_path_factory) -> list:
    """The losses of four iterations loaded in the main process: what every loading mode gives."""
    cfg = _training_cfg(tiny_resnet18_opts, tmp_path_factory.mktemp("zero"), *LOADER_RUN)
    trainer, _ = run_training(cfg, trainer_cls=_NoEvalTrainer)
    return losses_of(trainer)


class _NoEvalTrainer(DefaultTrainer):
    @classmethod
    def test(cls, cfg, model):
        return {}


class _NaNAfter(torch.nn.Module):
    """Wraps a model; from the given call on, its classification loss is NaN."""

    def __init__(self, model, bad_call):
        super().__init__()
        self.model, self.calls, self.bad_call = model, 0, bad_call

    def forward(self, batch):
        out = self.model(batch)
        if self.training:
            self.calls += 1
            if self.calls > self.bad_call:
                out["loss_cls"] = out["loss_cls"] * float("nan")
        return out


def test_nan_loss_stops_training_naming_iteration_and_terms(tiny_cfg, tmp_path):
    class NaNTrainer(_NoEvalTrainer):
        @classmethod
        def build_model(cls, cfg):
            return _NaNAfter(super().build_model(cfg), bad_call=2)

    with pytest.raises(NonFiniteLossError, match=r"iteration 2 \(epoch 0\): loss_cls=nan, loss_triplet=\d"):
        run_training(tiny_cfg(tmp_path, "SOLVER.MAX_ITER", 5), trainer_cls=NaNTrainer)


@pytest.mark.slow
def test_eval_only_reproduces_the_final_evaluation(tmp_path, full_run):
    trained, _, results = full_run
    weights = trained / "model_final.pth"
    assert weights.is_file()

    config_file = trained / "config.yaml"
    sys.path.insert(0, TOOLS)
    try:
        import train_net
    finally:
        sys.path.remove(TOOLS)
    args = default_argument_parser().parse_args(
        [
            "--config-file",
            str(config_file),
            "--eval-only",
            "MODEL.WEIGHTS",
            str(weights),
            "MODEL.HEADS.NUM_CLASSES",
            0,
            "OUTPUT_DIR",
            str(tmp_path / "eval"),
        ]
    )
    evaluated = train_net.main(args)
    assert evaluated["Rank-1"] == results["Rank-1"] and evaluated["mAP"] == results["mAP"]
    assert (tmp_path / "eval" / "config.yaml").is_file() and (tmp_path / "eval" / "env.txt").is_file()


@pytest.mark.slow
def test_cpu_precision_decision_picks_the_trainer(tiny_cfg, tmp_path):
    # a CPU with native bf16 (forced, so on any CPU): bfloat16 autocast without a scaler, AMP off
    with forced_cpu(**NATIVE_BF16):
        trainer, _ = run_training(
            tiny_cfg(tmp_path / "bf16", "SOLVER.AMP.ENABLED", False, "SOLVER.MAX_ITER", 1),
            trainer_cls=_NoEvalTrainer,
        )
    assert trainer._trainer.amp_dtype is torch.bfloat16 and trainer.grad_scaler is None
    assert all(torch.isfinite(torch.tensor(losses_of(trainer))))
    assert trainer.model.backbone.conv1.weight.is_contiguous(memory_format=torch.channels_last)
    # AVX2 only: float32 even with SOLVER.AMP.ENABLED (bfloat16 would be emulated)
    with forced_cpu(**AVX2_ONLY):
        trainer = _NoEvalTrainer(
            tiny_cfg(tmp_path / "fp32", "SOLVER.AMP.ENABLED", True, "SOLVER.MAX_ITER", 2)
        )
    assert type(trainer._trainer) is SimpleTrainer


class _Snapshot(HookBase):
    """State dict copies taken before the given iterations."""

    def __init__(self, iterations):
        self.iterations, self.states = iterations, {}

    def before_step(self):
        if self.trainer.iter in self.iterations:
            self.states[self.trainer.iter] = {
                k: v.clone() for k, v in self.trainer.model.state_dict().items()
            }


@pytest.mark.slow
def test_layer_freeze_keeps_backbone_for_freeze_iters(tiny_cfg, tmp_path):
    cfg = tiny_cfg(
        tmp_path, "MODEL.FREEZE_LAYERS", ["backbone"], "SOLVER.FREEZE_ITERS", 2, "SOLVER.MAX_ITER", 4
    )
    snap = _Snapshot({0, 2})
    trainer, _ = run_training(cfg, extra_hooks=[snap], trainer_cls=_NoEvalTrainer)
    first, frozen_end, last = snap.states[0], snap.states[2], trainer.model.state_dict()
    for key in ("backbone.conv1.weight", "backbone.bn1.running_mean", "backbone.layer1.0.bn1.weight"):
        assert torch.equal(first[key], frozen_end[key]), key  # frozen: no update, BN statistics fixed
        assert not torch.equal(frozen_end[key], last[key]), key  # open again after FREEZE_ITERS
    assert not torch.equal(first["heads.weight"], frozen_end["heads.weight"])


def _ddp_main(config_file, result_file):
    """One DDP process: train a few iterations, evaluate, rank 0 writes what it saw."""
    from fastreid.engine import DefaultTrainer
    from fastreid.utils import comm

    torch.set_num_threads(1)
    cfg = get_cfg()
    cfg.merge_from_file(config_file)
    set_seed(cfg.SEED)
    trainer = DefaultTrainer(cfg)
    trainer.resume_or_load(resume=False)
    results = trainer.train()
    losses = [v for v, _ in trainer.storage.history("total_loss").values()]
    if comm.is_main_process():
        with open(result_file, "w") as f:
            json.dump(
                {
                    "world": comm.get_world_size(),
                    "losses": losses,
                    "iters_per_epoch": trainer.iters_per_epoch,
                    "results": {k: float(v) for k, v in results.items() if k in ("Rank-1", "mAP")},
                    "ddp": type(trainer.model).__name__,
                },
                f,
            )


@pytest.mark.slow
def test_two_process_gloo_ddp_trains_and_evaluates(tiny_cfg, tmp_path):
    from fastreid.engine import launch

    cfg = tiny_cfg(tmp_path, "SOLVER.IMS_PER_BATCH", 16, "SOLVER.MAX_EPOCH", 1, "DATALOADER.NUM_WORKERS", 0)
    config_file = tmp_path / "ddp.yaml"
    config_file.write_text(cfg.dump())
    result_file = tmp_path / "result.json"
    launch(_ddp_main, 2, dist_url="auto", args=(str(config_file), str(result_file)))
    got = json.loads(result_file.read_text())
    assert got["world"] == 2 and got["ddp"] == "DistributedDataParallel"
    assert len(got["losses"]) == got["iters_per_epoch"] >= 3
    assert all(v == v for v in got["losses"])  # no NaN
    assert 0.0 <= got["results"]["Rank-1"] <= 100.0 and got["results"]["mAP"] > 0
    assert (tmp_path / "model_final.pth").is_file()


@pytest.mark.slow
def test_precise_bn_and_plateau_hook_in_a_real_run(tiny_cfg, tmp_path, caplog):
    import logging

    cfg = tiny_cfg(
        tmp_path,
        "SOLVER.MAX_EPOCH",
        2,
        "TEST.EVAL_PERIOD",
        1,
        "TEST.PRECISE_BN.ENABLED",
        True,
        "TEST.PRECISE_BN.NUM_ITER",
        2,
        "SOLVER.PLATEAU.ENABLED",
        True,
        "SOLVER.PLATEAU.PATIENCE",
        1,
        "SOLVER.PLATEAU.FACTOR",
        0.5,
    )
    fastreid_logger = logging.getLogger("fastreid")  # does not propagate once setup_logger ran
    fastreid_logger.addHandler(caplog.handler)
    try:
        trainer, results = run_training(cfg)
    finally:
        fastreid_logger.removeHandler(caplog.handler)
    # a record can reach caplog twice (via the fastreid logger and via the root logger)
    precise = {id(r) for r in caplog.records if "Running precise BN for 2 iterations" in r.getMessage()}
    assert len(precise) == 2
    metric = [v for v, _ in trainer.storage.history("metric").values()]
    assert len(metric) == 2 and metric[-1] == results["metric"]
    # model_final is written once, before the final evaluation (checkpoint first); the trainer
    # state once that evaluation is over goes next to it, and the checkpointer reads both
    path = tmp_path / "model_final.pth"
    before_eval = torch.load(path, weights_only=True)
    assert before_eval["trainer"]["hooks"]["EvalHook"]["last_eval_iter"] < before_eval["iteration"]
    saved = trainer.checkpointer.read(str(path))
    assert {"optimizer", "lr_sched", "warmup_sched", "iteration", "epoch", "trainer"} <= set(saved)
    assert {"iteration", "rng_states", "hooks"} <= set(saved["trainer"])
    assert saved["trainer"]["hooks"]["PlateauHook"]["best"] == max(metric)
    assert saved["trainer"]["hooks"]["EvalHook"]["last_eval_iter"] == saved["iteration"]
    assert torch.equal(saved["model"]["heads.weight"], before_eval["model"]["heads.weight"])
    best = torch.load(tmp_path / "model_best.pth", weights_only=True)
    assert best["best_metric"] == max(metric)
    if metric[1] <= metric[0]:  # no improvement after one evaluation: the LR was halved
        assert trainer.plateau.num_reductions == 1
