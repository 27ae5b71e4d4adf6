"""Fixtures of the distillation tests: a tiny teacher's config and checkpoint, and the synthetic
Market-1501 for the end-to-end run."""

from __future__ import annotations

import os

import pytest
from distill_helpers import tiny  # tests/distill, on the path as the test's folder

from fastreid.data.synthetic import SyntheticSpec, generate_market1501
from fastreid.modeling import build_model
from fastreid.utils.checkpoint import Checkpointer


@pytest.fixture(scope="module")
def teacher_files(tmp_path_factory) -> tuple[str, str]:
    """``(config.yaml, model_final.pth)`` of a ResNet-18 teacher of configs/Distill/demo_teacher.yml."""
    folder = tmp_path_factory.mktemp("teacher")
    cfg = tiny("configs/Distill/demo_teacher.yml", "OUTPUT_DIR", str(folder))
    model = build_model(cfg, log_summary=False)
    Checkpointer(model, str(folder)).save("model_final")
    config = os.path.join(str(folder), "config.yaml")
    with open(config, "w", encoding="utf-8") as f:
        f.write(cfg.dump())
    return config, os.path.join(str(folder), "model_final.pth")


@pytest.fixture(scope="session")
def market_root(tmp_path_factory) -> str:
    root = str(tmp_path_factory.mktemp("synthetic_market"))
    generate_market1501(root, SyntheticSpec.small(seed=2))
    return root
