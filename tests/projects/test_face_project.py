"""A verification project shaped like upstream's FastFace (``faceproj``): a Trainer that builds
itself with ``TrainerBase.__init__`` and upstream's attributes, its own trainer of one step
(``SimpleTrainer`` subclass using ``_data_loader_iter`` and ``_write_metrics``), a second
optimizer with its LR hook, a Checkpointer subclass with its own files and tag, a
PeriodicCheckpointer hook subclass with its own schedule, and a data set and evaluator of pairs.
Trained through its ``main``, resumed, and evaluated with ``--eval-only``."""

from __future__ import annotations

import json
import os

import tinynet  # noqa: F401  (registers the project's backbone)
import torch
from faceproj import train_net
from retriproj import TinyPeople  # noqa: F401  (the training set)


def test_a_trainer_that_builds_itself_trains_checkpoints_and_resumes(project_args, tmp_path):
    results = train_net.main(project_args("faceproj/configs/tiny_face.yml"))
    assert set(results) == {"Accuracy", "Threshold", "metric"}
    out = tmp_path / "out"
    # the main checkpoints (epochs 0 and 1 of 3 iterations) and the classifier's own
    assert (out / "model_0000.pth").is_file() and (out / "model_final.pth").is_file()
    assert (out / "softmax_weight_0000_rank_00.pth").is_file() and (out / "softmax_weight_00.pth").is_file()
    assert (out / "last_checkpoint").read_text() == "model_final.pth"
    assert (out / "last_weight_00").read_text() == "softmax_weight_00.pth"
    metrics = [json.loads(line) for line in (out / "metrics.json").read_text().splitlines()]
    assert [m["iteration"] for m in metrics if "metric" in m] == [2, 5]  # evaluated after each epoch
    assert all("loss_cls" in m for m in metrics if "metric" not in m and "lr" in m)
    saved = torch.load(out / "softmax_weight_00.pth", weights_only=True)
    assert saved["model"]["weight"].shape == (6, 32)  # six training identities
    assert os.path.isfile(out / "visualization" / "TinyPeoplePairs_similarities.json")

    again = train_net.main(project_args("faceproj/configs/tiny_face.yml", "--resume"))
    assert again is None  # the finished run: nothing to train, its final evaluation done

    evaluated = train_net.main(
        project_args(
            str(out / "config.yaml"), "--eval-only", "MODEL.WEIGHTS", out / "model_final.pth", output="eval"
        )
    )
    assert evaluated["Accuracy"] == results["Accuracy"]
