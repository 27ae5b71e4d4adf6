"""Real run folders for the report's end-to-end and browser tests: a tiny ResNet-18 trained for two
epochs on the shared synthetic Market-1501 (an evaluation after each), and an ``--eval-only`` run of
its weights. Built once per session (a few seconds each) and only read by the tests."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from report_runs import REPO, TINY_RUN, train_tiny


@pytest.fixture(scope="session")
def report_data_root(synthetic_market_root) -> Iterator[str]:
    """FASTREID_DATASETS pointing at the shared synthetic set, torch on one thread (restored after)."""
    import torch

    old, threads = os.environ.get("FASTREID_DATASETS"), torch.get_num_threads()
    os.environ["FASTREID_DATASETS"] = synthetic_market_root
    torch.set_num_threads(1)
    yield synthetic_market_root
    torch.set_num_threads(threads)
    if old is None:
        os.environ.pop("FASTREID_DATASETS", None)
    else:
        os.environ["FASTREID_DATASETS"] = old


@pytest.fixture(scope="session")
def tiny_run_cfg(report_data_root, tiny_resnet18_opts):
    """``tiny_run_cfg(output_dir, *overrides)``: the bag-of-tricks config of the tiny run."""
    from fastreid.config import get_cfg

    def make(output_dir, *overrides):
        cfg = get_cfg()
        cfg.merge_from_file(str(REPO / "configs" / "Base-bagtricks.yml"))
        cfg.merge_from_list([*tiny_resnet18_opts, *TINY_RUN, "OUTPUT_DIR", str(output_dir), *overrides])
        return cfg

    return make


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory, tiny_run_cfg):
    """``(OUTPUT_DIR, trainer, final results)`` of the tiny training run (report written)."""
    out = tmp_path_factory.mktemp("report_runs") / "trained"
    trainer, results = train_tiny(tiny_run_cfg(out))
    return out, trainer, results


@pytest.fixture(scope="session")
def eval_only_run(tmp_path_factory, trained_run, report_data_root):
    """``(OUTPUT_DIR, results)`` of ``--eval-only`` of the trained run's final weights, through the
    training command's ``main`` (as ``fastreid-train --eval-only`` runs it)."""
    from fastreid.cli.train import main
    from fastreid.engine import default_argument_parser

    trained, _, _ = trained_run
    out = tmp_path_factory.mktemp("report_runs") / "evaluated"
    args = default_argument_parser().parse_args(
        ["--config-file", str(trained / "config.yaml"), "--eval-only",
         "MODEL.WEIGHTS", str(trained / "model_final.pth"), "OUTPUT_DIR", str(out)]
    )  # fmt: skip
    return out, main(args)
