"""The target: a registered data set's training images (identities kept apart, for measuring only)
or plain folders of images; what is wrong with it is one line naming the key."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from fastreid.data.datasets import Market1501
from fastreid.data.datasets.bases import DatasetFormatError
from fastreid.projects.uda import UdaTrainer, target_images


def test_a_registered_sets_training_split(uda_cfg, uda_data_root, tmp_path):
    target = target_images(uda_cfg(tmp_path))
    records = Market1501(root=uda_data_root).train
    assert target.paths == [r[0] for r in records] and target.camids == [r[2] for r in records]
    assert target.identities == [r[1] for r in records] and target.sources == ["Market1501"]
    labels = [i % 3 - 1 for i in range(len(target))]  # -1 every third image: an outlier
    items = target.items(labels)
    assert len(items) == len(target) - len(target) // 3 - (len(target) % 3 > 0)
    assert all(y >= 0 for _, y, _ in items) and items[0] == (target.paths[1], 0, target.camids[1])


def test_folders_of_images_without_identities(uda_cfg, uda_data_root, tmp_path):
    folder = tmp_path / "site" / "cam1"
    folder.parent.mkdir()
    shutil.copytree(os.path.join(uda_data_root, "Market-1501-v15.09.15", "query"), folder)
    (tmp_path / "site" / "notes.txt").write_text("not an image")
    cfg = uda_cfg(
        tmp_path / "run", "DATASETS.NAMES", (), "DATASETS.UNLABELED_FOLDERS", [str(tmp_path / "site")]
    )
    target = target_images(cfg)
    assert target.paths == sorted(str(p) for p in folder.iterdir())
    assert target.identities is None and set(target.camids) == {0}

    both = target_images(uda_cfg(tmp_path / "run", "DATASETS.UNLABELED_FOLDERS", [str(folder)]))
    assert both.identities is None and both.paths[-len(target) :] == target.paths  # no identities to measure


def test_an_empty_folder_or_no_target_is_one_line(uda_cfg, tmp_path):
    (tmp_path / "empty").mkdir()
    cfg = uda_cfg(
        tmp_path / "run", "DATASETS.NAMES", (), "DATASETS.UNLABELED_FOLDERS", [str(tmp_path / "empty")]
    )
    with pytest.raises(DatasetFormatError, match="DATASETS.UNLABELED_FOLDERS: .*empty holds no image"):
        target_images(cfg)
    with pytest.raises(
        DatasetFormatError, match="ClusterContrast has no target images: name a re-ID data set"
    ):
        target_images(uda_cfg(tmp_path / "run", "DATASETS.NAMES", ()))


def test_a_folder_target_trains(uda_cfg, uda_data_root, tmp_path):
    # one clustering and one step (~4 s on 2 cores): the folder's images train as a data set's do
    folder = os.path.join(uda_data_root, "Market-1501-v15.09.15", "bounding_box_train")
    cfg = uda_cfg(
        tmp_path / "run",
        *("DATASETS.NAMES", (), "DATASETS.TESTS", (), "DATASETS.UNLABELED_FOLDERS", [folder]),
        *("SOLVER.MAX_EPOCH", 1, "UDA.ITERS_PER_EPOCH", 1, "TEST.REPORT", False),
    )
    trainer = UdaTrainer(cfg)
    trainer.resume_or_load(resume=False)
    trainer.train()
    assert len(trainer.pseudo_labels) == len(trainer.target) > 50
    with open(tmp_path / "run" / "metrics.json", encoding="utf-8") as f:
        step = next(line for line in map(json.loads, f) if "pseudo_labels/clusters" in line)
    assert "pseudo_labels/NMI" not in step and step["pseudo_labels/clusters"] >= 4


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("UDA.CLUSTER.EPS", 1.0, "UDA.CLUSTER.EPS must be in \\(0, 1\\)"),
        ("UDA.CLUSTER.K2", 0, "UDA.CLUSTER.K2 must be at least 1"),
        ("UDA.MEMORY.TEMP", 0.0, "UDA.MEMORY.TEMP must be positive"),
        ("UDA.MEMORY.MOMENTUM", 1.0, "UDA.MEMORY.MOMENTUM must be in \\[0, 1\\)"),
    ],
)
def test_bad_values_are_config_errors_before_anything_is_built(uda_cfg, tmp_path, key, value, message):
    from fastreid.config import ConfigError

    with pytest.raises(ConfigError, match=message):
        UdaTrainer(uda_cfg(tmp_path, key, value))
