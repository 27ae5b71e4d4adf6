"""Training faces through the standard front door: ``fastreid-train`` / ``tools/train_net.py`` with
a configs/Face file picks FaceTrainer, trains the IResNet with Partial FC on the synthetic MS1MV2,
evaluates verification accuracy on the pairs, writes the centres' checkpoints, and ``--eval-only``
of its weights gives the same numbers; bad input stops before training with one line naming the
file and the fix."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import torch
from train_command import train_log  # tests/, on the path

from fastreid.cli import train

CONFIG = "configs/Face/face_demo.yml"
# the demo's IResNet-18 on 16x16 faces; 48 training images in batches of 16
TINY = [
    "MODEL.DEVICE", "cpu",
    "SOLVER.IMS_PER_BATCH", "16",
    "TEST.IMS_PER_BATCH", "40",
    "DATASETS.TESTS", "('LFW',)",
    "SEED", "3",
]  # fmt: skip


def _broken_root(faces_root, tmp_path):
    """The small synthetic faces with one image of LFW's pairs list gone."""
    root = tmp_path / "datasets"
    os.makedirs(root / "faces_emore_val")
    os.symlink(os.path.join(faces_root, "MS_Celeb_1M"), root / "MS_Celeb_1M")
    shutil.copytree(os.path.join(faces_root, "faces_emore_val", "lfw"), root / "faces_emore_val" / "lfw")
    pairs = root / "faces_emore_val" / "lfw" / "pairs.txt"
    second = pairs.read_text().splitlines()[2].split()[1]  # line 3: the second pair's right image
    os.remove(root / "faces_emore_val" / "lfw" / second)
    return root, pairs, second


def test_a_missing_image_of_a_pairs_list_stops_before_training(faces_root, tmp_path, monkeypatch, capsys):
    root, pairs, missing = _broken_root(faces_root, tmp_path)
    monkeypatch.setenv("FASTREID_DATASETS", str(root))
    out = tmp_path / "run"
    assert train.run(["--config-file", CONFIG, *TINY, "OUTPUT_DIR", str(out)]) == 1
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "DatasetFormatError" in line]
    assert len(lines) == 1, err[-2000:]
    assert f"{pairs}:3 names {missing}, which does not exist" in lines[0]
    assert "add the image or remove that pair from the list" in lines[0]
    assert not os.path.exists(out / "model_final.pth") and not os.path.exists(out / "metrics.json")


@pytest.mark.parametrize(
    "opts, expected",
    [
        (
            ["MODEL.HEADS.NUM_CLASSES", "5"],
            "has 12 identities but MODEL.HEADS.NUM_CLASSES is 5: set MODEL.HEADS.NUM_CLASSES 0",
        ),
        (["SOLVER.OPT", "Adam"], "SOLVER.OPT is Adam: set SOLVER.OPT SGD"),
    ],
)
def test_a_config_that_cannot_train_is_one_line(faces_root, tmp_path, monkeypatch, capsys, opts, expected):
    monkeypatch.setenv("FASTREID_DATASETS", faces_root)
    assert train.run(["--config-file", CONFIG, *TINY, "OUTPUT_DIR", str(tmp_path / "run"), *opts]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("Config error")]
    assert len(lines) == 1 and expected in lines[0], lines


@pytest.mark.slow
def test_tools_train_net_trains_with_partial_fc_and_evaluates_then_its_weights_evaluate_the_same(
    faces_root, tmp_path, run_tool
):
    """The three runs are the command tools/train_net.py runs (``fastreid.cli.train.run``), in this
    process: what is tested is the family's training, evaluation and resume, not the process."""
    out = tmp_path / "run"
    opts = [
        *TINY,
        "SOLVER.MAX_EPOCH",
        "2",
        "SOLVER.CHECKPOINT_PERIOD",
        "1",
        "TEST.EVAL_PERIOD",
        "2",
        "OUTPUT_DIR",
        str(out),
    ]

    log = train_log(run_tool, faces_root, "--config-file", CONFIG, *opts)
    assert "FaceBaseline trains with fastreid.projects.face.trainer.FaceTrainer" in log
    assert "Partial FC: classes 0..11 of 12 on process 0 of 1, sample rate 0.5" in log
    assert "| LFW" in log and "TAR@FAR=1e-02" in log, log[-3000:]
    with open(out / "metrics.json", encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    assert any("loss_cls" in r for r in records)
    trained = [r for r in records if "Accuracy" in r][-1]
    assert 50 <= trained["Accuracy"] <= 100 and trained["metric"] == trained["Accuracy"]
    # the model's checkpoints without a classifier, the centres' of every class beside them
    assert "heads.weight" not in torch.load(out / "model_final.pth", weights_only=False)["model"]
    centres = torch.load(out / "softmax_weight_final.pth", weights_only=True)
    assert centres["model"]["weight"].shape == (12, 128) and centres["num_classes"] == 12
    assert (out / "softmax_weight_0000.pth").is_file() and (
        out / "last_weight"
    ).read_text() == "softmax_weight_final.pth"
    assert (out / "visualization" / "LFW_roc.png").is_file()

    log = train_log(
        run_tool,
        faces_root,
        "--config-file",
        CONFIG,
        "--eval-only",
        *opts[:-2],
        "OUTPUT_DIR",
        tmp_path / "eval",
        "MODEL.WEIGHTS",
        out / "model_final.pth",
    )
    row = next(line for line in log.splitlines() if line.startswith("| LFW"))
    values = [float(v) for v in row.strip("|").split("|")[1:]]
    keys = ["Accuracy", "Threshold", "TAR@FAR=1e-03", "TAR@FAR=1e-02", "metric"]
    assert values == pytest.approx([trained[k] for k in keys], abs=0.01)

    # resuming the finished run: the centres are read back, nothing left to train
    log = train_log(run_tool, faces_root, "--config-file", CONFIG, "--resume", *opts)
    assert "Loaded the Partial FC centres from" in log and "softmax_weight_final.pth" in log
