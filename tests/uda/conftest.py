"""Fixtures of the ClusterContrast tests: the tiny config, and one tiny training run through the
standard front door (``fastreid.cli.train.main``), shared by every test that only needs *a* run."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from uda_helpers import CONFIG, TINY, train_argv  # tests/uda, on the path as the test's folder

from fastreid.config import get_cfg


@pytest.fixture(scope="session")
def uda_data_root(synthetic_market_root) -> Iterator[str]:
    """The shared synthetic Market-1501 as FASTREID_DATASETS (the target: its training images)."""
    old = os.environ.get("FASTREID_DATASETS")
    os.environ["FASTREID_DATASETS"] = synthetic_market_root
    yield synthetic_market_root
    if old is None:
        os.environ.pop("FASTREID_DATASETS", None)
    else:
        os.environ["FASTREID_DATASETS"] = old


@pytest.fixture
def uda_cfg(uda_data_root, tiny_resnet18_opts):
    """``uda_cfg(output_dir, *overrides)``: the family's base config, the tiny ResNet-18 and TINY."""

    def make(output_dir, *overrides):
        cfg = get_cfg()
        cfg.merge_from_file(CONFIG)
        cfg.merge_from_list([*tiny_resnet18_opts, *TINY, "OUTPUT_DIR", str(output_dir), *overrides])
        return cfg

    return make


@pytest.fixture(scope="session")
def uda_run(uda_data_root, tiny_resnet18_opts, tmp_path_factory) -> dict:
    """One tiny ClusterContrast run (2 epochs of 2 iterations, evaluated at the end) through
    ``fastreid.cli.train.main``: ``{"output": its OUTPUT_DIR, "results": the evaluation}``."""
    from fastreid.cli import train
    from fastreid.engine import default_argument_parser

    out = tmp_path_factory.mktemp("uda_run") / "run"
    args = default_argument_parser().parse_args(train_argv(out, tiny_resnet18_opts))
    return {"output": str(out), "results": train.main(args)}
