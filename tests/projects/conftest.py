"""Fixtures of the project tests: the tiny synthetic pedestrians as FASTREID_DATASETS, and the
command line the projects' ``main`` gets."""

from __future__ import annotations

import os

import pytest
import tiny_people

from fastreid.engine import default_argument_parser

HERE = os.path.dirname(os.path.abspath(__file__))

# What every project test runs with on top of its config file: one training step on the CPU.
ONE_STEP = [
    "MODEL.DEVICE",
    "cpu",
    "SOLVER.MAX_ITER",
    "1",
    "SOLVER.IMS_PER_BATCH",
    "8",
    "SOLVER.AMP.ENABLED",
    "False",
    "TEST.IMS_PER_BATCH",
    "8",
    "DATALOADER.NUM_WORKERS",
    "0",
    "CUDNN_BENCHMARK",
    "False",
]


@pytest.fixture(scope="session")
def people_root(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("datasets"))
    tiny_people.write_tiny_people(root)
    return root


@pytest.fixture
def datasets_env(people_root, monkeypatch):
    monkeypatch.setenv("FASTREID_DATASETS", people_root)
    return people_root


@pytest.fixture
def project_args(datasets_env, tmp_path, one_torch_thread):
    """``project_args(config_file, *flags, *opts)``: the parsed command line of a project's
    ``train_net.py``, writing into a fresh OUTPUT_DIR."""

    def make(config_file, *extra, output="out"):
        flags = [a for a in extra if str(a).startswith("--")]
        opts = [str(a) for a in extra if not str(a).startswith("--")]
        argv = ["--config-file", os.path.join(HERE, config_file), *flags]
        argv += [*ONE_STEP, "OUTPUT_DIR", str(tmp_path / output), *opts]
        return default_argument_parser().parse_args(argv)

    return make
