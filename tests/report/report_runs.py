"""Helpers of the report's end-to-end tests (fixtures in conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# On top of the suite's tiny ResNet-18 options: ~4 iterations per epoch, every iteration logged,
# one evaluation per epoch, no periodic checkpoint (only the final and best models are written).
TINY_RUN = [
    "SOLVER.AMP.ENABLED", False,
    "SOLVER.IMS_PER_BATCH", 16,
    "SOLVER.MAX_EPOCH", 2,
    "SOLVER.WARMUP_ITERS", 2,
    "SOLVER.STEPS", [1],
    "SOLVER.LOG_PERIOD", 1,
    "SOLVER.CHECKPOINT_PERIOD", 100,
    "TEST.EVAL_PERIOD", 1,
    "TEST.IMS_PER_BATCH", 32,
    "CUDNN_BENCHMARK", False,
]  # fmt: skip


def train_tiny(cfg):
    """Train as ``fastreid-train`` does (job setup, then DefaultTrainer); returns the trainer and
    the final evaluation's results."""
    from types import SimpleNamespace

    from fastreid.engine import DefaultTrainer, default_setup

    default_setup(cfg, SimpleNamespace(config_file="", eval_only=False))
    cfg.freeze()
    trainer = DefaultTrainer(cfg)
    trainer.resume_or_load(resume=False)
    return trainer, trainer.train()


def evaluation_lines(run_dir) -> list[dict]:
    """The evaluation lines of ``run_dir/metrics.json`` (those holding metrics), in order."""
    text = (Path(run_dir) / "metrics.json").read_text(encoding="utf-8")
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    return [line for line in lines if "mAP" in line]
