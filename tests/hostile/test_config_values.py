"""Bad config values and files end tools/train_net.py with one ``Config error: ...`` line and exit 2,
before any data is read or model built. A few cases run the whole command line in this process
(``fastreid.cli.train.run``, what the script calls; tools/visualize_result.py once as a script in a
fresh interpreter); the others run its config check alone (``check_config_in_process``)."""

from __future__ import annotations

import os

import pytest
from hostile_helpers import VISUALIZE, assert_one_line_error, check_config_in_process, run_cli

from fastreid.cli import train

# (overrides, words the one-line message must contain)
VALUE_CASES = {
    "lr_nan": (["SOLVER.BASE_LR", ".nan"], ["SOLVER.BASE_LR"]),
    "lr_negative": (["SOLVER.BASE_LR", "-0.1"], ["SOLVER.BASE_LR"]),
    "batch_zero": (["SOLVER.IMS_PER_BATCH", "0"], ["SOLVER.IMS_PER_BATCH"]),
    "batch_negative": (["SOLVER.IMS_PER_BATCH", "-8"], ["SOLVER.IMS_PER_BATCH"]),
    "batch_not_multiple_of_k": (["SOLVER.IMS_PER_BATCH", "10"], ["SOLVER.IMS_PER_BATCH", "NUM_INSTANCE"]),
    "batch_not_divisible_by_processes": (["--num-gpus", "3"], ["SOLVER.IMS_PER_BATCH", "processes"]),
    "test_batch_zero": (["TEST.IMS_PER_BATCH", "0"], ["TEST.IMS_PER_BATCH"]),
    "image_size_zero": (["INPUT.SIZE_TRAIN", "[0, 0]"], ["INPUT.SIZE_TRAIN"]),
    "workers_negative": (["DATALOADER.NUM_WORKERS", "-1"], ["DATALOADER.NUM_WORKERS"]),
    "threads_negative": (["DATALOADER.NUM_THREADS", "-2"], ["DATALOADER.NUM_THREADS"]),
    "timeout_negative": (["DATALOADER.TIMEOUT", "-1"], ["DATALOADER.TIMEOUT"]),
    "seed_too_large": (["SEED", str(2**70)], ["SEED"]),
    "device_nonsense": (["MODEL.DEVICE", "foo"], ["MODEL.DEVICE", "'foo'", "cpu, cuda"]),
    "rerank_method_unknown": (["TEST.RERANK.METHOD", "jacard"], ["TEST.RERANK.METHOD", "knn_jaccard"]),
    "test_metric_unknown": (["TEST.METRIC", "cosin"], ["TEST.METRIC", "cosine"]),
}


def _split(overrides: list[str]) -> tuple[list[str], list[str]]:
    flags = overrides if overrides[0].startswith("--") else []
    return flags, [] if flags else overrides


# the cases that also run the whole command line (fastreid.cli.train.run), as a user runs it
WHOLE_COMMAND = {"lr_nan", "batch_not_divisible_by_processes"}


def _train_net(*args, whole_command: bool, tool, capsys):
    if whole_command:
        return tool(train.run, *args)
    return check_config_in_process(*args, capsys=capsys)


@pytest.mark.parametrize("case", sorted(VALUE_CASES))
def test_bad_value_is_one_config_error_line_before_any_work(case, tiny_config, tmp_path, tool, capsys):
    overrides, needles = VALUE_CASES[case]
    flags, opts = _split(overrides)
    out = tmp_path / "out"
    args = ("--config-file", tiny_config, *flags, "OUTPUT_DIR", str(out), *opts)
    result = _train_net(*args, whole_command=case in WHOLE_COMMAND, tool=tool, capsys=capsys)
    assert_one_line_error(result, 2, "Config error:", *needles)
    # nothing was started: no log, no saved config, no model
    assert not (out / "log.txt").exists() and not (out / "config.yaml").exists()


def test_base_cycle_names_the_chain(tmp_path, capsys):
    a, b = tmp_path / "a.yml", tmp_path / "b.yml"
    a.write_text("_BASE_: b.yml\nSOLVER:\n  BASE_LR: 0.1\n")
    b.write_text("_BASE_: a.yml\n")
    result = check_config_in_process("--config-file", a, capsys=capsys)
    line = assert_one_line_error(result, 2, "Config error:", "_BASE_ cycle", "a.yml -> ", "b.yml -> ")
    assert len(line) < 500


@pytest.mark.parametrize(
    "text, needle, whole_command",
    [
        ("", "is empty", True),
        ("# only a comment\n", "is empty", False),
        ("- 1\n- 2\n", "holds a list at the top level", False),
    ],
)
def test_empty_or_non_mapping_yaml(tmp_path, tool, text, needle, whole_command, capsys):
    cfg = tmp_path / "bad.yml"
    cfg.write_text(text)
    result = _train_net("--config-file", cfg, whole_command=whole_command, tool=tool, capsys=capsys)
    assert_one_line_error(result, 2, "Config error:", str(cfg), needle)


def test_empty_base_file_is_named(tmp_path, capsys):
    (tmp_path / "base.yml").write_text("")
    cfg = tmp_path / "child.yml"
    cfg.write_text("_BASE_: base.yml\n")
    result = check_config_in_process("--config-file", cfg, capsys=capsys)
    assert_one_line_error(result, 2, "Config error:", "base.yml", "is empty", "child.yml")


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root can write anywhere")
def test_unwritable_output_dir(tiny_config, tmp_path, tool):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        result = tool(train.run, "--config-file", tiny_config, "OUTPUT_DIR", locked / "run")
    finally:
        locked.chmod(0o700)
    assert_one_line_error(result, 2, "Config error:", "OUTPUT_DIR", "not a writable folder")


@pytest.mark.slow
def test_visualize_result_reports_config_errors_in_one_line(tiny_config, tmp_path, data_root):
    """tools/visualize_result.py as a script in a fresh interpreter (the one test that runs the file
    itself; what the tool does is tested in this process)."""
    result = run_cli(
        VISUALIZE,
        "--config-file",
        tiny_config,
        "--output",
        tmp_path / "vis",
        "TEST.IMS_PER_BATCH",
        "0",
        data_root=data_root,
    )
    assert_one_line_error(result, 2, "Config error:", "TEST.IMS_PER_BATCH")


def test_output_dir_below_a_file(tiny_config, tmp_path, tool):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    result = tool(train.run, "--config-file", tiny_config, "OUTPUT_DIR", blocker / "run")
    assert_one_line_error(
        result, 2, "Config error:", "OUTPUT_DIR", str(blocker / "run"), "not a writable folder"
    )
