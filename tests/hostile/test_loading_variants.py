"""Loading in-process: what must load without any opt-in (our checkpoints, upstream's layouts),
what strict loading excepts, checksums, the one resolve_device, and that a user error inside the
training loop leaves no traceback on the console."""

from __future__ import annotations

import glob
import logging
import os

import numpy as np
import pytest
import torch
from torch import nn

from fastreid.config import ConfigError, get_cfg, validate_config
from fastreid.modeling import build_model
from fastreid.utils.checkpoint import Checkpointer
from fastreid.utils.checksum import checksum_path, verify_checksum, write_checksum
from fastreid.utils.errors import CheckpointError, DeviceError, UserError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def tiny_cfg(num_classes: int = 4):
    cfg = get_cfg()
    cfg.MODEL.DEVICE = "cpu"
    cfg.MODEL.BACKBONE.DEPTH = "18x"
    cfg.MODEL.BACKBONE.FEAT_DIM = 512
    cfg.MODEL.BACKBONE.PRETRAIN = False
    cfg.MODEL.HEADS.NUM_CLASSES = num_classes
    cfg.MODEL.HEADS.WITH_BNNECK = True
    cfg.INPUT.SIZE_TEST = [64, 32]
    return cfg


@pytest.fixture(scope="module")
def source_model():
    torch.manual_seed(0)
    return build_model(tiny_cfg(), log_summary=False)


def _fresh(num_classes: int = 4) -> nn.Module:
    torch.manual_seed(1)
    return build_model(tiny_cfg(num_classes), log_summary=False)


def _same(a: nn.Module, b: nn.Module, skip: tuple[str, ...] = ()) -> bool:
    sb = b.state_dict()
    return all(torch.equal(v, sb[k]) for k, v in a.state_dict().items() if not k.startswith(skip))


def test_upstream_training_checkpoint_loads_without_trust(tmp_path, source_model, fr_log):
    """Upstream's Checkpointer.save: model, optimizer, lr_sched, warmup_sched, epoch and metric."""
    opt = torch.optim.SGD(source_model.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, [30, 55])  # its state holds a Counter
    warmup = {
        "warmup_factor": 0.1,
        "warmup_iters": 2000,
        "warmup_method": "linear",
        "base_lrs": [0.1],
        "last_epoch": 2000,
        "_step_count": 2001,
        "verbose": False,
        "_last_lr": [0.1],
    }
    path = tmp_path / "model_final.pth"
    torch.save(
        {
            "model": source_model.state_dict(),
            "optimizer": opt.state_dict(),
            "lr_sched": sched.state_dict(),
            "warmup_sched": warmup,
            "epoch": 59,
            "metric": 91.5,
            "np_metric": np.float64(91.5),
        },
        path,
    )
    model = _fresh()
    extra = Checkpointer(model).load(str(path))
    assert _same(source_model, model)
    assert extra["epoch"] == 59 and extra["lr_sched"]["milestones"] == {30: 1, 55: 1}
    assert float(extra["np_metric"]) == 91.5


def test_upstream_variants_load_strictly(tmp_path, source_model, fr_log):
    """Bare state dict, DDP ``module.`` prefixes, upstream's pixel_mean/pixel_std buffers."""
    state = {f"module.{k}": v for k, v in source_model.state_dict().items()}
    state["module.pixel_mean"] = torch.tensor([1.0, 2.0, 3.0]).view(1, -1, 1, 1)  # differs from the config
    state["module.pixel_std"] = source_model.pixel_std.clone()
    path = tmp_path / "ddp_bare.pth"
    torch.save(state, path)
    model = _fresh()
    Checkpointer(model).load(str(path))
    assert _same(source_model, model)
    assert torch.equal(model.pixel_mean, source_model.pixel_mean)  # the config's value stays
    assert "pixel_mean" in fr_log.text and "differs from the config" in fr_log.text


def test_classifier_only_difference_is_accepted_with_a_log_line(tmp_path, source_model, fr_log):
    path = tmp_path / "other_ids.pth"
    torch.save({"model": source_model.state_dict()}, path)
    model = _fresh(num_classes=7)
    Checkpointer(model).load(str(path))
    assert _same(source_model, model, skip=("heads.weight",))
    assert "Classifier tensors not loaded" in fr_log.text and "heads.weight" in fr_log.text


@pytest.mark.parametrize("change", ["missing", "unexpected", "shape"])
def test_strict_loading_refuses_and_non_strict_accepts(tmp_path, source_model, change, fr_log):
    state = dict(source_model.state_dict())
    if change == "missing":
        del state["heads.bottleneck.0.weight"]
    elif change == "unexpected":
        state["backbone.NL_2.0.g.weight"] = torch.zeros(1, 512, 1, 1)
    else:
        state["backbone.conv1.weight"] = torch.zeros(64, 3, 3, 3)
    path = str(tmp_path / "partial.pth")
    torch.save({"model": state}, path)
    with pytest.raises(CheckpointError, match=f"{path} does not fit the model"):
        Checkpointer(_fresh()).load(path)
    Checkpointer(_fresh(), strict_load=False).load(path)  # deliberately partial: loads what fits


def test_our_checkpoints_round_trip_with_checksum(tmp_path, source_model):
    opt = torch.optim.Adam(source_model.parameters())
    ckpt = Checkpointer(source_model, str(tmp_path), optimizer=opt)
    from fastreid.utils.rng import capture_rng_states

    ckpt.save("model_0001", iteration=7, rng_states=capture_rng_states())
    path = tmp_path / "model_0001.pth"
    assert verify_checksum(str(path))
    model = _fresh()
    extra = Checkpointer(model, str(tmp_path), optimizer=torch.optim.Adam(model.parameters())).resume_or_load(
        ""
    )
    assert extra["iteration"] == 7 and "rng_states" in extra
    assert _same(source_model, model)


def test_checksum_mismatch_and_bad_sidecar(tmp_path):
    path = str(tmp_path / "w.pth")
    torch.save({"model": {"a": torch.ones(1000)}}, path)
    assert not verify_checksum(path)  # no sidecar: nothing to verify (upstream files)
    write_checksum(path)
    assert verify_checksum(path)
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        f.write(b"\x00garbage\x00")
    with pytest.raises(CheckpointError, match="does not match its checksum"):
        verify_checksum(path)
    with open(checksum_path(path), "w") as f:
        f.write("not a digest\n")
    with pytest.raises(CheckpointError, match="does not hold a SHA-256"):
        verify_checksum(path)


def test_a_kill_between_save_and_checksum_leaves_no_stale_sidecar(tmp_path, monkeypatch):
    import fastreid.utils.checkpoint as checkpoint_module

    path = str(tmp_path / "model_final.pth")
    Checkpointer.write(path, {"model": {"a": torch.zeros(3)}})
    assert verify_checksum(path)

    def killed(_path):
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoint_module, "write_checksum", killed)
    with pytest.raises(KeyboardInterrupt):
        Checkpointer.write(path, {"model": {"a": torch.ones(3)}})
    assert not os.path.exists(checksum_path(path))  # unverified, never wrongly refused
    model = nn.Module()
    model.a = nn.Parameter(torch.zeros(3))
    Checkpointer(model).load(path)
    assert torch.equal(model.a.data, torch.ones(3))


@pytest.mark.slow
def test_every_shipped_and_upstream_config_passes_validation():
    files = glob.glob(os.path.join(REPO, "configs", "**", "*.yml"), recursive=True)
    files += glob.glob("/tmp/upstream-fastreid/configs/**/*.yml", recursive=True)
    checked = 0
    for path in files:
        cfg = get_cfg()
        try:
            cfg.merge_from_file(path)
        except ConfigError as e:
            if "Unknown config key" in str(e):
                continue  # keys of upstream projects this package does not have
            raise
        validate_config(cfg)
        checked += 1
    assert checked >= 20


def test_one_resolve_device(fr_log):
    from fastreid.engine import resolve_device as engine_resolve
    from fastreid.modeling.meta_arch import resolve_device as modeling_resolve
    from fastreid.utils.device import resolve_device
    from fastreid.utils.platform import forced_platform

    assert engine_resolve is resolve_device and modeling_resolve is resolve_device
    with forced_platform(cuda=False):
        assert resolve_device("cpu") == "cpu"
        assert resolve_device("cuda:0") == "cpu"
        if not torch.backends.mps.is_available():
            assert resolve_device("mps") == "cpu"
            assert resolve_device("auto") == "cpu"
        if not (hasattr(torch, "xpu") and torch.xpu.is_available()):
            assert resolve_device("xpu") == "cpu"
            assert "XPU is not available; running on the CPU" in fr_log.text
    with pytest.raises(DeviceError, match="'foo' is not a device; use cpu, cuda"):
        resolve_device("foo")


def test_user_error_in_training_logs_no_console_traceback():
    from fastreid.engine.train_loop import TrainerBase

    class Failing(TrainerBase):
        def __init__(self, error):
            super().__init__()
            self.error = error

        def run_step(self):
            raise self.error

    records: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record):
            records.append(record)

    handler = Collect(level=logging.INFO)  # what a console handler sees
    logger = logging.getLogger("fastreid.engine.train_loop")
    logger.addHandler(handler)
    try:
        with pytest.raises(UserError):
            Failing(CheckpointError("bad file x.pth")).train(0, 2, 1)
        assert not [r for r in records if r.exc_info]
        with pytest.raises(RuntimeError):
            Failing(RuntimeError("a bug")).train(0, 2, 1)
        assert [r for r in records if r.exc_info]  # a real bug keeps its traceback
    finally:
        logger.removeHandler(handler)


def test_rotated_checkpoints_take_their_sidecars_along(tmp_path):
    from fastreid.utils.checkpoint import PeriodicCheckpointer

    model = nn.Linear(2, 2)
    periodic = PeriodicCheckpointer(Checkpointer(model, str(tmp_path)), 1, max_epoch=10, max_to_keep=1)
    for epoch in range(3):
        periodic.step(epoch)
    assert sorted(os.listdir(tmp_path)) == ["last_checkpoint", "model_0002.pth", "model_0002.pth.sha256"]


@pytest.mark.slow
def test_trust_opt_in_loads_files_that_need_unpickling(tmp_path, source_model, fr_log):
    import argparse

    from fastreid.utils.safe_load import checkpoint_trusted, set_checkpoint_trust

    path = str(tmp_path / "with_args.pth")
    torch.save({"model": source_model.state_dict(), "args": argparse.Namespace(lr=0.1)}, path)
    with pytest.raises(CheckpointError, match="needs full unpickling.*--trust-checkpoint"):
        Checkpointer(_fresh()).load(path)
    assert Checkpointer(_fresh(), trust_checkpoint=True).load(path)["args"].lr == 0.1
    assert not checkpoint_trusted()
    set_checkpoint_trust(True)
    try:
        assert Checkpointer(_fresh()).load(path)["args"].lr == 0.1
    finally:
        set_checkpoint_trust(False)
    assert "loading it fully because MODEL.TRUST_CHECKPOINT is set" in fr_log.text


def test_user_error_of_a_spawned_process_is_rebuilt_for_the_one_line_report():
    import traceback

    from fastreid.utils.errors import user_error_from_traceback

    def formatted(error: BaseException) -> str:
        try:
            raise error
        except BaseException:
            return "\n\n-- Process 1 terminated with the following error:\n" + traceback.format_exc()

    rebuilt = user_error_from_traceback(formatted(ConfigError("SOLVER.BASE_LR is nan; it must be finite")))
    assert rebuilt is not None and rebuilt.exit_code == 2 and rebuilt.label == "Config error"
    assert str(rebuilt) == "SOLVER.BASE_LR is nan; it must be finite"
    rebuilt = user_error_from_traceback(formatted(CheckpointError("Checkpoint x.pth does not exist")))
    assert rebuilt is not None and rebuilt.exit_code == 1 and rebuilt.label == "CheckpointError"
    assert user_error_from_traceback(formatted(RuntimeError("a bug"))) is None
    assert user_error_from_traceback("") is None


@pytest.mark.parametrize(
    "key, value, needle",
    [
        ("MODEL.PIXEL_STD", [0.0, 1.0, 1.0], "MODEL.PIXEL_STD"),
        ("INPUT.FLIP.PROB", 1.5, "INPUT.FLIP.PROB"),
        ("SOLVER.MOMENTUM", float("inf"), "SOLVER.MOMENTUM"),
        ("DATALOADER.PREFETCH_FACTOR", 0, "DATALOADER.PREFETCH_FACTOR"),
        ("SOLVER.MAX_EPOCH", -1, "SOLVER.MAX_EPOCH"),
    ],
)
def test_more_value_checks(key, value, needle):
    cfg = get_cfg()
    cfg.merge_from_list([key, value])
    with pytest.raises(ConfigError, match=needle):
        validate_config(cfg)
    validate_config(get_cfg())  # the defaults pass


@pytest.mark.parametrize("content", ["../elsewhere.pth", "sub/../../elsewhere.pth", "/etc/passwd", ""])
def test_last_checkpoint_may_only_name_files_in_its_folder(tmp_path, content):
    out = tmp_path / "out"
    out.mkdir()
    torch.save({"model": {}}, tmp_path / "elsewhere.pth")
    (out / "last_checkpoint").write_text(content)
    with pytest.raises(CheckpointError, match="outside OUTPUT_DIR|is empty"):
        Checkpointer(nn.Linear(1, 1), str(out)).resume_or_load("", resume=True)
    (out / "last_checkpoint").write_text("model_0001.pth")  # inside, but deleted
    with pytest.raises(CheckpointError, match="model_0001.pth, which does not exist"):
        Checkpointer(nn.Linear(1, 1), str(out)).resume_or_load("", resume=True)
