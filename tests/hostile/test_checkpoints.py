"""Hostile and damaged checkpoints through the tools' command lines (run in this process): a
pickle payload never runs (via
MODEL.WEIGHTS in training and --eval-only, --resume, MODEL.BACKBONE.PRETRAIN_PATH, and a
last_checkpoint naming a file outside OUTPUT_DIR), damaged files are refused by name, partial
loads fail unless asked for. Every failure: exit 1, one line on stderr, no traceback."""

from __future__ import annotations

import os

import pytest
import torch
from hostile_helpers import assert_one_line_error, write_malicious_checkpoint

from fastreid.cli import train, visualize


@pytest.fixture
def train_net(tiny_config, tool):
    """``train_net(output_dir, *opts, flags=())``: tools/train_net.py's command line on the tiny
    config (``fastreid.cli.train.run`` in this process)."""

    def run(output_dir, *opts, flags=()):
        return tool(train.run, "--config-file", tiny_config, *flags, "OUTPUT_DIR", output_dir, *opts)

    return run


@pytest.fixture
def marker(tmp_path) -> str:
    path = str(tmp_path / "PAYLOAD_RAN")
    yield path
    assert not os.path.exists(path), "the checkpoint's pickle payload ran"


def test_payload_is_real(tmp_path, marker):
    """The malicious file does run code when fully unpickled (so the refusals below mean something)."""
    from fastreid.utils.safe_load import load_torch_file

    path = write_malicious_checkpoint(str(tmp_path / "evil.pth"), marker)
    load_torch_file(path, trust=True)
    assert os.path.isdir(marker)
    os.rmdir(marker)


def test_malicious_model_weights_in_training(train_net, tmp_path, marker, trained_state):
    evil = write_malicious_checkpoint(str(tmp_path / "evil.pth"), marker, dict(trained_state))
    result = train_net(tmp_path / "out", "MODEL.WEIGHTS", evil)
    assert_one_line_error(result, 1, "CheckpointError", evil, "--trust-checkpoint", "refusing")
    assert not (tmp_path / "out" / "model_final.pth").exists()


def test_malicious_model_weights_in_eval_only(train_net, tmp_path, marker, trained_state):
    evil = write_malicious_checkpoint(str(tmp_path / "evil.pth"), marker, dict(trained_state))
    result = train_net(tmp_path / "out", "MODEL.WEIGHTS", evil, flags=("--eval-only",))
    assert_one_line_error(result, 1, "CheckpointError", evil, "--trust-checkpoint")
    assert "Rank-1" not in result.stdout


def test_malicious_resume_checkpoint(train_net, output_dir_copy, marker, trained_state):
    evil = write_malicious_checkpoint(
        os.path.join(output_dir_copy, "model_0000.pth"), marker, dict(trained_state)
    )
    with open(os.path.join(output_dir_copy, "last_checkpoint"), "w") as f:
        f.write("model_0000.pth")
    result = train_net(output_dir_copy, "SOLVER.MAX_ITER", 4, flags=("--resume",))
    assert_one_line_error(result, 1, "CheckpointError", evil, "--trust-checkpoint")


def test_malicious_pretrain_path(train_net, tmp_path, marker, trained_state):
    evil = write_malicious_checkpoint(str(tmp_path / "imagenet.pth"), marker, dict(trained_state))
    result = train_net(
        tmp_path / "out", "MODEL.BACKBONE.PRETRAIN", "True", "MODEL.BACKBONE.PRETRAIN_PATH", evil
    )
    assert_one_line_error(
        result, 1, "CheckpointError", "MODEL.BACKBONE.PRETRAIN_PATH", evil, "--trust-checkpoint"
    )


def test_last_checkpoint_outside_output_dir(train_net, output_dir_copy, tmp_path, marker, trained_state):
    evil = write_malicious_checkpoint(str(tmp_path / "elsewhere.pth"), marker, dict(trained_state))
    with open(os.path.join(output_dir_copy, "last_checkpoint"), "w") as f:
        f.write(evil)  # an absolute path
    result = train_net(output_dir_copy, "SOLVER.MAX_ITER", 4, flags=("--resume", "--trust-checkpoint"))
    # refused by location even when checkpoints are trusted
    assert_one_line_error(result, 1, "CheckpointError", "last_checkpoint", "outside OUTPUT_DIR", evil)


def test_visualize_result_refuses_malicious_weights(tiny_config, tmp_path, tool, marker, trained_state):
    evil = write_malicious_checkpoint(str(tmp_path / "evil.pth"), marker, dict(trained_state))
    result = tool(
        visualize.run, "--config-file", tiny_config, "--output", tmp_path / "vis", "MODEL.WEIGHTS", evil
    )
    assert_one_line_error(result, 1, "CheckpointError", evil, "--trust-checkpoint")


def test_garbage_in_a_checkpoint_fails_its_checksum(train_net, output_dir_copy):
    path = os.path.join(output_dir_copy, "model_final.pth")
    assert os.path.isfile(path + ".sha256")
    size = os.path.getsize(path)
    with open(path, "r+b") as f:  # 4 KiB of garbage in the middle of the tensor data
        f.seek(size // 2)
        f.write(os.urandom(4096))
    assert os.path.getsize(path) == size
    result = train_net(output_dir_copy, "MODEL.WEIGHTS", path, flags=("--eval-only",))
    assert_one_line_error(result, 1, "CheckpointError", path, "checksum")
    assert "Rank-1" not in result.stdout


def _damage(path: str, how: str) -> None:
    if how == "zero_bytes":
        open(path, "wb").close()
    elif how == "truncated":
        with open(path, "rb") as f:
            data = f.read()
        with open(path, "wb") as f:
            f.write(data[: len(data) // 3])
    elif how == "text":
        with open(path, "w") as f:
            f.write("this is not a checkpoint\n")
    os.remove(path + ".sha256")  # as if copied without its sidecar: the reader must notice anyway


@pytest.mark.parametrize(
    "how, needle", [("zero_bytes", "is empty"), ("truncated", "not a readable"), ("text", "not a readable")]
)
def test_damaged_weights_are_named(train_net, output_dir_copy, how, needle):
    path = os.path.join(output_dir_copy, "model_final.pth")
    _damage(path, how)
    result = train_net(output_dir_copy, "MODEL.WEIGHTS", path, flags=("--eval-only",))
    assert_one_line_error(result, 1, "CheckpointError", path, needle)


def test_missing_weights_file(train_net, tmp_path):
    missing = str(tmp_path / "nope" / "model_final.pth")
    result = train_net(tmp_path / "out", "MODEL.WEIGHTS", missing, flags=("--eval-only",))
    assert_one_line_error(result, 1, missing, "not found")  # the one loader: same message both ways
    result = train_net(tmp_path / "out2", "MODEL.WEIGHTS", missing)
    assert_one_line_error(result, 1, missing, "not found")


def test_last_checkpoint_naming_a_deleted_file(train_net, output_dir_copy):
    os.remove(os.path.join(output_dir_copy, "model_final.pth"))
    result = train_net(output_dir_copy, "SOLVER.MAX_ITER", 4, flags=("--resume",))
    assert_one_line_error(
        result, 1, "CheckpointError", "last_checkpoint", "model_final.pth", "does not exist"
    )


@pytest.mark.slow  # two evaluations of the tiny model
def test_partial_checkpoint_fails_unless_strict_is_off(train_net, tmp_path, trained_state):
    state = dict(trained_state)
    dropped = [k for k in state if k.startswith("backbone.layer4.1.")]
    for key in dropped:
        del state[key]
    # BatchNorm fills in a missing num_batches_tracked itself; everything else counts as missing
    dropped = [k for k in dropped if not k.endswith("num_batches_tracked")]
    state["backbone.layer1.0.conv1.weight"] = torch.zeros(64, 64, 1, 1)  # wrongly shaped
    partial = str(tmp_path / "partial.pth")
    torch.save({"model": state}, partial)
    result = train_net(tmp_path / "out", "MODEL.WEIGHTS", partial, flags=("--eval-only",))
    line = assert_one_line_error(
        result,
        1,
        "CheckpointError",
        partial,
        "does not fit the model",
        f"{len(dropped)} tensors missing",
        "1 shape-mismatched",
        "MODEL.WEIGHTS_STRICT False",
    )
    assert (
        "| missing" in result.stdout and "backbone.layer4.1" in result.stdout
    )  # the table, on the console log
    assert len(line) < 600

    result = train_net(
        tmp_path / "out", "MODEL.WEIGHTS", partial, "MODEL.WEIGHTS_STRICT", "False", flags=("--eval-only",)
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Rank-1" in result.stdout
