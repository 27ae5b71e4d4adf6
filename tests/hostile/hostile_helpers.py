"""Helpers of the hostile-input suite: the tiny config, a malicious checkpoint, a runner for the
real tool scripts in a fresh interpreter, and the check of the one-line error policy. The tools run
in the test's process (the ``tool`` fixture, tests/hostile/conftest.py) unless the fresh
interpreter is the point."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

import torch

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VISUALIZE = os.path.join(REPO, "tools", "visualize_result.py")

# A ResNet-18 on 64x32 images, two iterations, no evaluation during training.
TINY_YAML = """\
_BASE_: {base}
MODEL:
  DEVICE: cpu
  BACKBONE:
    DEPTH: 18x
    FEAT_DIM: 512
    PRETRAIN: False
INPUT:
  SIZE_TRAIN: [64, 32]
  SIZE_TEST: [64, 32]
  PADDING:
    SIZE: 4
DATALOADER:
  NUM_WORKERS: 0
  NUM_INSTANCE: 4
SOLVER:
  IMS_PER_BATCH: 8
  MAX_ITER: 2
  WARMUP_ITERS: 1
  CHECKPOINT_PERIOD: 1
  LOG_PERIOD: 1
TEST:
  EVAL_PERIOD: 0
  IMS_PER_BATCH: 32
"""


class Payload:
    """Unpickling this object creates the folder ``path`` (what a malicious checkpoint would do)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (os.makedirs, (self.path, 0o755, True))


def write_malicious_checkpoint(path: str, marker: str, state_dict: dict | None = None) -> str:
    """A ``.pth`` whose loading with full unpickling runs ``Payload`` (creates ``marker``)."""
    torch.save({"model": state_dict or {}, "note": Payload(marker)}, path)
    return path


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str

    @property
    def stderr_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


def run_cli(script: str, *args: str, data_root: str, timeout: float = 240) -> Result:
    """Run a tool script as a user would: a fresh interpreter, this checkout on PYTHONPATH (for
    the script file itself; what the tool does is tested in-process by the ``tool`` fixture)."""
    env = dict(os.environ)
    env.update(PYTHONPATH=REPO, OMP_NUM_THREADS="1", FASTREID_DATASETS=data_root, PYTHONWARNINGS="ignore")
    proc = subprocess.run(
        [sys.executable, script, *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=REPO,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def check_config_in_process(*args: str, capsys) -> Result:
    """What ``tools/train_net.py ARGS`` does up to its config check (parse the command line, find
    the config file, merge and validate it under the tools' one-line error policy), in this
    process, without the rest of ``fastreid.cli.train.run`` (the ``tool`` fixture runs all of it
    for a few cases)."""
    from fastreid.cli.train import load_config
    from fastreid.config.locate import resolve_config_file
    from fastreid.engine import default_argument_parser
    from fastreid.utils.errors import run_tool

    capsys.readouterr()
    args = default_argument_parser().parse_args([str(a) for a in args])
    args.config_file = resolve_config_file(args.config_file)
    code = run_tool(lambda: load_config(args))
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)


def assert_one_line_error(result: Result, exit_code: int, *needles: str) -> str:
    """The tool failed with ``exit_code``, printed exactly one line on stderr containing every
    needle, and no traceback reached the console."""
    assert result.returncode == exit_code, (result.returncode, result.stderr[-3000:], result.stdout[-3000:])
    lines = result.stderr_lines
    assert len(lines) == 1, result.stderr[-3000:]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert "Traceback" not in result.stdout and "Traceback" not in result.stderr
    return lines[0]
