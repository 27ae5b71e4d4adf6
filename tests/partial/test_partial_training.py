"""Partial re-ID through the standard front door: ``tools/train_net.py --config-file
configs/PartialReID/partial_market_demo.yml`` trains PartialBaseline on the synthetic Market-1501
with PartialTrainer and evaluates the three synthetic partial sets with the DSR evaluator; then
``--eval-only`` of the weights it wrote gives the same numbers."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = "configs/PartialReID/partial_market_demo.yml"
TINY = [
    "INPUT.SIZE_TRAIN", "[128,128]",  # the smallest images the DSR pools fit (an 8 x 8 map)
    "INPUT.SIZE_TEST", "[128,128]",
    "SOLVER.IMS_PER_BATCH", "16",
    "DATALOADER.NUM_INSTANCE", "4",
    "SOLVER.WARMUP_ITERS", "0",
    "SOLVER.MAX_EPOCH", "1",
    "SOLVER.DELAY_EPOCHS", "0",
    "TEST.EVAL_PERIOD", "1",
    "TEST.IMS_PER_BATCH", "32",
    "TEST.FLIP.ENABLED", "True",
]  # fmt: skip
SETS = ("PartialREID", "PartialiLIDS", "OccludedREID")


def _rows(log: str) -> dict[str, list[float]]:
    rows = {}
    for line in log.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] in SETS:
            rows[cells[0]] = [float(v) for v in cells[1:]]
    return rows


@pytest.mark.slow
def test_train_net_trains_on_market_and_evaluates_the_partial_sets(partial_root, tmp_path):
    out = tmp_path / "run"
    env = dict(os.environ, FASTREID_DATASETS=partial_root, OMP_NUM_THREADS="2")
    cmd = [sys.executable, "tools/train_net.py", "--config-file", CONFIG]
    done = subprocess.run(
        cmd + TINY + ["OUTPUT_DIR", str(out)], cwd=REPO, env=env, capture_output=True, text=True, timeout=900
    )
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-3000:]
    assert "PartialBaseline trains with fastreid.projects.partial.trainer.PartialTrainer" in log
    assert "loss_fore_cls" in log and "loss_fore_triplet" in log
    assert "Testing with DSR setting" in log and "mixed with lambda" in log
    trained = _rows(log)
    assert set(trained) == set(SETS), log[-3000:]
    for values in trained.values():
        assert all(0 <= v <= 100 for v in values)

    evaluated = subprocess.run(
        cmd
        + [
            "--eval-only",
            *TINY,
            "OUTPUT_DIR",
            str(tmp_path / "eval"),
            "MODEL.WEIGHTS",
            str(out / "model_final.pth"),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert evaluated.returncode == 0, (evaluated.stdout + evaluated.stderr)[-3000:]
    again = _rows(evaluated.stdout + evaluated.stderr)
    assert again.keys() == trained.keys()
    for name in SETS:
        assert again[name] == pytest.approx(trained[name], abs=0.01)
