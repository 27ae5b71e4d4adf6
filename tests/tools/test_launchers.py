"""The Windows launchers carry the variables and the command they must, and train_net.py's
command line behaves (clear config errors, everything behind the __main__ guard)."""

from __future__ import annotations

import os
import re

import pytest

from fastreid.cli import train
from fastreid.engine import default_argument_parser

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BAT = os.path.join(REPO, "train_windows_recommended.bat")
PATCHED = os.path.join(REPO, "train_windows_patched.py")
TRAIN_NET = os.path.join(REPO, "tools", "train_net.py")


@pytest.fixture(scope="module")
def bat_text():
    with open(BAT, "rb") as f:
        raw = f.read()
    assert b"\r\n" in raw and b"\n" not in raw.replace(b"\r\n", b""), "cmd.exe wants CRLF line endings"
    return raw.decode("ascii")


def _lines(text):
    return [
        line.strip()
        for line in text.splitlines()
        if line.strip() and not line.strip().upper().startswith("REM")
    ]


def test_batch_file_runs_the_python_launcher(bat_text):
    """The .bat holds no settings of its own: it runs train_windows_patched.py, which applies
    fastreid.utils.env.apply_windows_safe_environment (the one source)."""
    code = "\n".join(_lines(bat_text))
    run = [line for line in _lines(bat_text) if ".py" in line]
    assert run == ['"%PY%" "%REPO%\\train_windows_patched.py" %*'], run
    assert "exit /b %EXITCODE%" in code
    for duplicated in ("TORCH_HOME=", "KMP_DUPLICATE_LIB_OK=", "OMP_NUM_THREADS=", "NUM_WORKERS"):
        assert duplicated not in code, duplicated
    assert "set DEBUG_CUDA_ERRORS=0" in code  # read by the Python launcher


@pytest.fixture
def patched(monkeypatch):
    monkeypatch.syspath_prepend(REPO)
    import train_windows_patched

    return train_windows_patched


def test_windows_environment_single_source(patched):
    from fastreid.utils.env import apply_windows_safe_environment

    with open(PATCHED, encoding="utf-8") as f:
        assert "apply_windows_safe_environment(REPO" in f.read()
    env = {"PYTHONPATH": "/elsewhere", "OMP_NUM_THREADS": "3", "KMP_DUPLICATE_LIB_OK": "FALSE"}
    changed = apply_windows_safe_environment(REPO, env, debug_cuda_errors=True)
    assert env["KMP_DUPLICATE_LIB_OK"] == "TRUE"
    assert env["TORCH_HOME"] == os.path.join(REPO, ".torch_cache")
    assert env["OMP_NUM_THREADS"] == "3" and "OMP_NUM_THREADS" not in changed  # the user's value stays
    assert env["PYTHONPATH"].split(os.pathsep) == [REPO, "/elsewhere"]
    assert env["CUDA_LAUNCH_BLOCKING"] == "1"
    assert "CUDA_LAUNCH_BLOCKING" not in apply_windows_safe_environment(REPO, {})


def test_patched_entry_builds_train_net_arguments(patched):
    argv = patched.build_argv(["--resume", "SOLVER.BASE_LR", "0.01", "--debug-cuda-errors"])
    assert argv == [
        "--config-file",
        patched.DEFAULT_CONFIG,
        "--cuda-launch-blocking",
        "--resume",
        "SOLVER.BASE_LR",
        "0.01",
        "DATALOADER.NUM_WORKERS",
        "0",
    ]
    assert os.path.isfile(patched.DEFAULT_CONFIG) and "plateau_solutions" in patched.DEFAULT_CONFIG
    args = default_argument_parser().parse_args(argv)
    assert args.resume and args.cuda_launch_blocking
    assert args.opts == ["SOLVER.BASE_LR", "0.01", "DATALOADER.NUM_WORKERS", "0"]


def test_train_net_keeps_everything_behind_the_main_guard():
    with open(TRAIN_NET, encoding="utf-8") as f:
        source = f.read()
    assert 'if __name__ == "__main__":\n    sys.exit(run())' in source
    tree_level_calls = [line for line in source.splitlines() if re.match(r"^(run|main|launch)\(", line)]
    assert tree_level_calls == []


# train_net.py's command line below runs in this process (``fastreid.cli.train.run``, what the
# script calls) with a fresh interpreter's logging; tests/engine/test_reliability_tool.py and
# test_torchrun.py run the script itself.
def test_config_error_is_one_line_and_exit_code_2(tmp_path, monkeypatch, run_tool):
    cfg = tmp_path / "bad.yml"
    cfg.write_text("SOLVER:\n  BASE_LRR: 0.1\n")
    monkeypatch.chdir(tmp_path)
    proc = run_tool(train.run, "--config-file", cfg, "OUTPUT_DIR", tmp_path)
    assert proc.returncode == 2
    err = proc.stderr.strip().splitlines()
    assert err == [f"Config error: Unknown config key SOLVER.BASE_LRR ({cfg}); did you mean SOLVER.BASE_LR?"]
    assert "Traceback" not in proc.stdout + proc.stderr


def test_missing_dataset_is_a_clear_message_not_a_traceback(tmp_path, monkeypatch, run_tool):
    monkeypatch.chdir(tmp_path)
    proc = run_tool(
        train.run,
        "--config-file",
        os.path.join(REPO, "configs", "Market1501", "bagtricks_R50.yml"),
        "MODEL.BACKBONE.PRETRAIN",
        "False",
        "OUTPUT_DIR",
        tmp_path / "out",
        env={"FASTREID_DATASETS": str(tmp_path / "no_data_here")},
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("DatasetNotFoundError: Market1501: not found:")
    assert "python -m fastreid.data.synthetic --root" in proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "Traceback" in (tmp_path / "out" / "log.txt").read_text()  # kept for bug reports
