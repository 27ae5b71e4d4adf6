"""tools/convert_checkpoint.py run as a user runs it, on checkpoints our models write."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from fastreid.config import get_cfg
from fastreid.modeling import build_model

pytestmark = pytest.mark.slow  # each test runs the tool in a fresh interpreter

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(REPO, "tools", "convert_checkpoint.py")
AGW = os.path.join(REPO, "configs", "Market1501", "AGW_R50.yml")
BAGTRICKS = os.path.join(REPO, "configs", "Market1501", "bagtricks_R50.yml")


def run_tool(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=REPO, OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, TOOL, *map(str, args)], capture_output=True, text=True, env=env, cwd=cwd, timeout=300
    )


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


def test_matching_checkpoint_loads_strictly_and_converts(agw_checkpoint, tmp_path):
    out = tmp_path / "clean.pth"
    result = run_tool(agw_checkpoint, "--config-file", AGW, "--config-file", BAGTRICKS, "--output", out)
    assert result.returncode == 0, result.stderr
    assert "iteration 1200" in result.stdout
    assert "Loads strictly into Baseline, build_resnet_backbone 50x, NL, 751 identities" in result.stdout
    assert "AGW_R50.yml" in result.stdout and "bagtricks_R50.yml" not in result.stdout
    converted = torch.load(out, weights_only=True)
    assert set(converted) == {"model"}
    assert set(converted["model"]) == set(torch.load(agw_checkpoint, weights_only=True)["model"])


def test_half_channel_non_local_checkpoint_is_named_with_its_difference(tmp_path):
    """What this fork used to write: NL blocks with in_channels // 2 inner channels."""
    path = tmp_path / "old_agw.pth"
    model = save_model(path, AGW, **{"MODEL.BACKBONE.NL_INTER_CHANNELS": "half"})
    state = {"module." + k: v for k, v in model.state_dict().items()}  # saved from DDP
    torch.save(state, path)
    result = run_tool(path, "--config-file", AGW, "--config-file", BAGTRICKS)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "No config loads it strictly" in result.stdout
    assert "35 tensors of another shape" in result.stdout
    assert "[256, 512, 1, 1] in the file, [1, 512, 1, 1] in the model" in result.stdout
    assert result.stdout.index("AGW_R50.yml") < result.stdout.index("bagtricks_R50.yml")
    # told the right inner channels, the same file loads strictly
    result = run_tool(path, "--config-file", AGW, "MODEL.BACKBONE.NL_INTER_CHANNELS", "half")
    assert result.returncode == 0 and "Loads strictly" in result.stdout


def test_unreadable_files_get_one_line(tmp_path):
    bad = tmp_path / "broken.pth"
    bad.write_bytes(b"not a checkpoint")
    result = run_tool(bad, "--config-file", AGW)
    assert result.returncode == 1
    assert result.stderr.startswith("CheckpointError:") and len(result.stderr.strip().splitlines()) == 1
    result = run_tool(tmp_path / "missing.pth")
    assert result.returncode == 1 and "does not exist" in result.stderr and "Traceback" not in result.stderr


def test_every_shipped_config_is_compared_by_default(agw_checkpoint):
    result = run_tool(agw_checkpoint)
    assert result.returncode == 0, result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("Loads strictly"))
    for dataset in ("DukeMTMC", "MSMT17", "Market1501"):
        assert f"{dataset}/AGW_R50.yml" in line
    assert "AGW_R50-ibn" not in line
