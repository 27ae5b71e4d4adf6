"""Fixtures of the hostile-input suite: a tiny synthetic Market-1501, a tiny config file and a
trained tiny checkpoint (one real two-iteration run of tools/train_net.py)."""

from __future__ import annotations

import os
import shutil

import pytest
import torch
from hostile_helpers import REPO, TINY_YAML, TRAIN_NET, run_cli


@pytest.fixture(scope="session")
def data_root(synthetic_market_root) -> str:
    """The shared synthetic Market-1501 (read-only: a test that damages data copies it first)."""
    return synthetic_market_root


@pytest.fixture(scope="session")
def tiny_config(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("hostile_cfg") / "tiny.yml"
    path.write_text(TINY_YAML.format(base=os.path.join(REPO, "configs", "Base-bagtricks.yml")))
    return str(path)


@pytest.fixture(scope="session")
def trained_dir(tmp_path_factory, data_root, tiny_config) -> str:
    """OUTPUT_DIR of a finished two-iteration training: model_final.pth, its .sha256, last_checkpoint."""
    out = str(tmp_path_factory.mktemp("hostile_trained"))
    result = run_cli(TRAIN_NET, "--config-file", tiny_config, "OUTPUT_DIR", out, data_root=data_root)
    assert result.returncode == 0, result.stderr[-3000:]
    assert os.path.isfile(os.path.join(out, "model_final.pth"))
    return out


@pytest.fixture
def output_dir_copy(tmp_path, trained_dir) -> str:
    """A private copy of the trained OUTPUT_DIR (tests may damage it)."""
    out = str(tmp_path / "out")
    shutil.copytree(trained_dir, out)
    return out


@pytest.fixture(scope="session")
def trained_state(trained_dir) -> dict:
    return torch.load(os.path.join(trained_dir, "model_final.pth"), map_location="cpu", weights_only=True)[
        "model"
    ]
