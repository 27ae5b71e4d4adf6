"""tools/convert_checkpoint.py's command line (``fastreid.cli.convert.run``, in this process; the
script itself once in a fresh interpreter), on checkpoints our models write."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from fastreid.cli import convert
from fastreid.config import get_cfg
from fastreid.modeling import build_model

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(REPO, "tools", "convert_checkpoint.py")
AGW = os.path.join(REPO, "configs", "Market1501", "AGW_R50.yml")
BAGTRICKS = os.path.join(REPO, "configs", "Market1501", "bagtricks_R50.yml")


@pytest.fixture
def convert_tool(run_tool):
    """``convert_tool(*argv)``: fastreid-convert (what tools/convert_checkpoint.py calls) in this
    process, one torch thread as OMP_NUM_THREADS=1 gives a process, a fresh interpreter's logging."""
    return lambda *argv: run_tool(convert.run, *argv, env={"OMP_NUM_THREADS": "1"})


def save_model(path, config, **overrides):
    cfg = get_cfg()
    cfg.merge_from_file(config)
    cfg.merge_from_list(
        ["MODEL.DEVICE", "cpu", "MODEL.HEADS.NUM_CLASSES", 751, "MODEL.BACKBONE.PRETRAIN", False]
        + [x for kv in overrides.items() for x in kv]
    )
    model = build_model(cfg, log_summary=False)
    torch.save({"model": model.state_dict(), "iteration": 1200, "optimizer": {}}, path)
    return model


@pytest.fixture(scope="module")
def agw_checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "model_final.pth"
    save_model(path, AGW)
    return path


def test_matching_checkpoint_loads_strictly_and_converts(agw_checkpoint, tmp_path, convert_tool):
    out = tmp_path / "clean.pth"
    result = convert_tool(agw_checkpoint, "--config-file", AGW, "--config-file", BAGTRICKS, "--output", out)
    assert result.returncode == 0, result.stderr
    assert "iteration 1200" in result.stdout
    assert "Loads strictly into Baseline, build_resnet_backbone 50x, NL, 751 identities" in result.stdout
    assert "AGW_R50.yml" in result.stdout and "bagtricks_R50.yml" not in result.stdout
    # --config-file restricts the comparison: the shipped AGW_R50 of the other data sets is not
    # compared, nor the given one a second time
    strict = next(x for x in result.stdout.splitlines() if x.startswith("Loads strictly"))
    assert strict.endswith(f"; configs: {AGW}"), strict
    converted = torch.load(out, weights_only=True)
    assert set(converted) == {"model"}
    assert set(converted["model"]) == set(torch.load(agw_checkpoint, weights_only=True)["model"])


def test_half_channel_non_local_checkpoint_is_named_with_its_difference(tmp_path, convert_tool):
    """What this fork used to write: NL blocks with in_channels // 2 inner channels."""
    path = tmp_path / "old_agw.pth"
    model = save_model(path, AGW, **{"MODEL.BACKBONE.NL_INTER_CHANNELS": "half"})
    state = {"module." + k: v for k, v in model.state_dict().items()}  # saved from DDP
    torch.save(state, path)
    result = convert_tool(path, "--config-file", AGW, "--config-file", BAGTRICKS)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "No config loads it strictly" in result.stdout
    assert "35 tensors of another shape" in result.stdout
    assert "[256, 512, 1, 1] in the file, [1, 512, 1, 1] in the model" in result.stdout
    assert result.stdout.index("AGW_R50.yml") < result.stdout.index("bagtricks_R50.yml")
    # told the right inner channels, the same file loads strictly
    result = convert_tool(path, "--config-file", AGW, "MODEL.BACKBONE.NL_INTER_CHANNELS", "half")
    assert result.returncode == 0 and "Loads strictly" in result.stdout


def test_unreadable_files_get_one_line(tmp_path, convert_tool):
    bad = tmp_path / "broken.pth"
    bad.write_bytes(b"not a checkpoint")
    result = convert_tool(bad, "--config-file", AGW)
    assert result.returncode == 1
    assert result.stderr.startswith("CheckpointError:") and len(result.stderr.strip().splitlines()) == 1
    result = convert_tool(tmp_path / "missing.pth")
    assert result.returncode == 1 and "does not exist" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
def test_the_script_reports_a_missing_file_in_one_line(tmp_path):
    """tools/convert_checkpoint.py as a user runs it, in a fresh interpreter (the one test of the
    script file itself)."""
    env = dict(os.environ, PYTHONPATH=REPO, OMP_NUM_THREADS="1")
    result = subprocess.run(
        [sys.executable, TOOL, str(tmp_path / "missing.pth")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 1 and "does not exist" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow  # every shipped config's model built on the meta device (~70 of them)
def test_every_shipped_config_is_compared_by_default(agw_checkpoint, convert_tool):
    result = convert_tool(agw_checkpoint)
    assert result.returncode == 0, result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("Loads strictly"))
    for dataset in ("DukeMTMC", "MSMT17", "Market1501"):
        assert f"{dataset}/AGW_R50.yml" in line
    assert "AGW_R50-ibn" not in line and "bagtricks_R50.yml" not in line
