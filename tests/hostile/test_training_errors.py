"""A user error raised inside the training loop (here an empty JPEG in the training set) ends
tools/train_net.py (its ``fastreid.cli.train.run``, in this process) with one line on stderr; the
console log shows no traceback (it is in log.txt)."""

from __future__ import annotations

import glob
import os
import shutil

import pytest
from hostile_helpers import assert_one_line_error

from fastreid.cli import train


@pytest.mark.slow
def test_empty_jpeg_during_training_is_one_line(tiny_config, data_root, tmp_path, tool):
    root = str(tmp_path / "data")
    shutil.copytree(data_root, root)
    images = sorted(glob.glob(os.path.join(root, "*", "bounding_box_train", "*.jpg")))
    with open(images[2], "wb"):
        pass  # an empty file
    out = tmp_path / "out"
    result = tool(
        train.run, "--config-file", tiny_config, "OUTPUT_DIR", out, "SOLVER.MAX_ITER", 20, data_root=root
    )
    assert_one_line_error(result, 1, os.path.basename(images[2]), "empty")
    with open(out / "log.txt", encoding="utf-8") as f:
        assert "Traceback" in f.read()  # kept for the developer, in the log file only
