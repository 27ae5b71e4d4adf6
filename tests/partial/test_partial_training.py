"""Partial re-ID through the standard front door: ``tools/train_net.py --config-file
configs/PartialReID/partial_market_demo.yml`` trains PartialBaseline on the synthetic Market-1501
with PartialTrainer and evaluates the three synthetic partial sets with the DSR evaluator; then
``--eval-only`` of the weights it wrote gives the same numbers."""

from __future__ import annotations

import pytest
from train_command import train_log  # tests/, on the path

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
def test_train_net_trains_on_market_and_evaluates_the_partial_sets(partial_root, tmp_path, run_tool):
    """Both runs are the command tools/train_net.py runs (``fastreid.cli.train.run``), in this
    process. 128 x 128 images (not the suite's 64 x 32): the DSR head's pools need an 8 x 8 map."""
    out = tmp_path / "run"

    log = train_log(run_tool, partial_root, "--config-file", CONFIG, *TINY, "OUTPUT_DIR", out)
    assert "PartialBaseline trains with fastreid.projects.partial.trainer.PartialTrainer" in log
    assert "loss_fore_cls" in log and "loss_fore_triplet" in log
    assert "Testing with DSR setting" in log and "mixed with lambda" in log
    trained = _rows(log)
    assert set(trained) == set(SETS), log[-3000:]
    for values in trained.values():
        assert all(0 <= v <= 100 for v in values)

    log = train_log(
        run_tool,
        partial_root,
        "--config-file",
        CONFIG,
        "--eval-only",
        *TINY,
        "OUTPUT_DIR",
        tmp_path / "eval",
        "MODEL.WEIGHTS",
        out / "model_final.pth",
    )
    again = _rows(log)
    assert again.keys() == trained.keys()
    for name in SETS:
        assert again[name] == pytest.approx(trained[name], abs=0.01)
