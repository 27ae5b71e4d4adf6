"""Fixtures of the hostile-input suite: a tiny synthetic Market-1501, a tiny config file, a
trained tiny checkpoint (one two-iteration training) and ``tool``, a tool's command line run in
this process."""

from __future__ import annotations

import os
import shutil

import pytest
import torch
from hostile_helpers import REPO, TINY_YAML

from fastreid.cli import train
from fastreid.engine import default_argument_parser


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
    args = default_argument_parser().parse_args(["--config-file", tiny_config, "OUTPUT_DIR", out])
    with pytest.MonkeyPatch.context() as env:  # what tools/train_net.py runs in one process
        env.setenv("FASTREID_DATASETS", data_root)
        train.main(args)
    assert os.path.isfile(os.path.join(out, "model_final.pth"))
    return out


@pytest.fixture
def tool(run_tool, data_root):
    """``tool(run, *argv, data_root=...)``: a tool's ``run(argv)`` (``fastreid.cli.train.run`` is
    what tools/train_net.py calls) in this process on the synthetic data, with one torch thread as
    a process with OMP_NUM_THREADS=1 (``run_tool``: a fresh interpreter's logging, the checkpoint
    trust put back afterwards)."""

    def call(run, *argv, data_root: str = data_root):
        return run_tool(run, *argv, env={"FASTREID_DATASETS": data_root, "OMP_NUM_THREADS": "1"})

    return call


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
