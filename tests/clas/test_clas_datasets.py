"""The classification data sets: Hymenoptera reads upstream's folder layout; ClasDataset gives images
and class indices (the training classes, sorted); mistakes in the folders stop with one line naming
the path and the fix: a class folder with no image, a file in an unknown format, an image in no
class folder, a val class with no training folder, a missing folder; and the family's sets are
refused by re-ID loaders and re-ID sets by the family."""

from __future__ import annotations

import os
import shutil

import pytest
import torch

from fastreid.config import get_cfg
from fastreid.data.build import build_reid_train_loader
from fastreid.data.datasets import UnknownDatasetError
from fastreid.data.datasets.bases import DatasetFormatError, DatasetNotFoundError, DatasetUsageError
from fastreid.data.transforms import build_transforms
from fastreid.projects.clas import ClasDataset, Hymenoptera, UnknownClassError, classification_dataset


@pytest.fixture
def copy_root(hymenoptera_root, tmp_path):
    """A writable copy of the small synthetic set (the session's copy stays untouched)."""
    shutil.copytree(os.path.join(hymenoptera_root, "hymenoptera_data"), tmp_path / "hymenoptera_data")
    return str(tmp_path)


def _one_line_error(error_type, root: str) -> str:
    with pytest.raises(error_type) as e:
        Hymenoptera(root=root)
    message = str(e.value)
    assert "\n" not in message, message
    return message


def test_hymenoptera_reads_upstreams_layout(hymenoptera_root):
    data = Hymenoptera(root=hymenoptera_root)
    folder = os.path.join(hymenoptera_root, "hymenoptera_data")
    assert data.classes == ["ants", "bees"]
    assert len(data.train) == 16 and len(data.val) == 8 and data.query is data.val and data.gallery == []
    assert data.train[0] == (os.path.join(folder, "train", "ants", "00001.jpg"), "ants", "0")
    assert [item[0] for item in data.train] == sorted(item[0] for item in data.train)
    assert {item[1] for item in data.val} == {"ants", "bees"}
    data.show_train()
    data.show_test()
    data.show_summary()


def test_clas_dataset_gives_images_and_class_indices(hymenoptera_root):
    data = Hymenoptera(root=hymenoptera_root)
    train_set = ClasDataset(data.train)
    assert train_set.classes == ["ants", "bees"] and train_set.num_classes == 2
    assert train_set.idx_to_class == {0: "ants", 1: "bees"} and len(train_set) == 16
    sample = train_set[9]
    assert sample["targets"] == 1 and sample["img_paths"].endswith(os.path.join("bees", "00002.jpg"))
    assert sample["images"].dtype == torch.uint8 and sample["images"].shape == (3, 40, 48)
    # the test set with the training index, keys as idx2class.json holds them (strings)
    test_set = ClasDataset(data.val, idx_to_class={"0": "ants", "1": "bees"})
    assert test_set.targets == [0] * 4 + [1] * 4
    # a val set missing a class keeps the training indices (upstream would re-index it)
    only_bees = ClasDataset([i for i in data.val if i[1] == "bees"], idx_to_class=train_set.idx_to_class)
    assert set(only_bees.targets) == {1}


def test_an_image_of_an_unknown_class_names_it(hymenoptera_root):
    data = Hymenoptera(root=hymenoptera_root)
    items = [*data.val, ("/data/wasp.jpg", "wasps", "0")]
    with pytest.raises(UnknownClassError) as e:
        ClasDataset(items, idx_to_class={0: "ants", 1: "bees"})
    assert "/data/wasp.jpg is of class 'wasps'" in str(
        e.value
    ) and "add its images to the training set" in str(e.value)


def test_a_class_folder_with_no_images(copy_root):
    empty = os.path.join(copy_root, "hymenoptera_data", "train", "wasps")
    os.makedirs(empty)
    with open(os.path.join(empty, ".DS_Store"), "wb"):
        pass  # hidden files do not count
    message = _one_line_error(DatasetFormatError, copy_root)
    assert f"the class folder {empty} holds no images" in message and "or remove the folder" in message


@pytest.mark.parametrize(
    "name, content, why",
    [
        ("00099.webp", b"RIFF\x00\x00\x00\x00WEBPVP8 ", "has the extension '.webp'"),
        ("notes.txt", b"hello", "has the extension '.txt'"),
        ("00099.jpg", b"\x00\x00\x00\x1cftypheic", "does not start as a JPEG, PNG or BMP file does"),
    ],
)
def test_a_file_in_an_unknown_format(copy_root, name, content, why):
    path = os.path.join(copy_root, "hymenoptera_data", "val", "bees", name)
    with open(path, "wb") as f:
        f.write(content)
    message = _one_line_error(DatasetFormatError, copy_root)
    assert message.startswith(f"{path} {why}") and "convert it to JPEG or move it out of" in message


def test_png_and_bmp_images_are_read(copy_root):
    from PIL import Image

    folder = os.path.join(copy_root, "hymenoptera_data", "train", "ants")
    Image.new("RGB", (48, 40), (10, 20, 30)).save(os.path.join(folder, "extra.png"))
    Image.new("RGB", (48, 40), (10, 20, 30)).save(os.path.join(folder, "extra.BMP"), format="BMP")
    assert len(Hymenoptera(root=copy_root).train) == 18


def test_an_image_in_no_class_folder(copy_root):
    split = os.path.join(copy_root, "hymenoptera_data", "train")
    shutil.copy(os.path.join(split, "ants", "00001.jpg"), os.path.join(split, "stray.jpg"))
    message = _one_line_error(DatasetFormatError, copy_root)
    assert (
        f"{os.path.join(split, 'stray.jpg')} is in no class folder; move it into {split}/<its class name>/"
        in message
    )


def test_a_val_class_with_no_training_folder(copy_root):
    base = os.path.join(copy_root, "hymenoptera_data")
    shutil.copytree(os.path.join(base, "val", "bees"), os.path.join(base, "val", "wasps"))
    message = _one_line_error(DatasetFormatError, copy_root)
    assert f"{os.path.join(base, 'val', 'wasps')} is a class with no training folder" in message
    assert "add its training images there, or remove it from val" in message
    # a training class missing from val is fine: it is never asked for
    shutil.rmtree(os.path.join(base, "val", "wasps"))
    shutil.rmtree(os.path.join(base, "val", "ants"))
    assert Hymenoptera(root=copy_root).classes == ["ants", "bees"]


def test_a_missing_folder_names_the_layout_and_the_synthetic_command(tmp_path):
    with pytest.raises(DatasetNotFoundError) as e:
        Hymenoptera(root=str(tmp_path))
    message = str(e.value)
    assert f"Hymenoptera: not found: {tmp_path / 'hymenoptera_data'}" in message
    assert "train/ants/*.jpg" in message and "python -m fastreid.data.synthetic.classes --root" in message


def test_split_with_no_class_folders(copy_root):
    val = os.path.join(copy_root, "hymenoptera_data", "val")
    shutil.rmtree(val)
    os.makedirs(val)
    message = _one_line_error(DatasetFormatError, copy_root)
    assert f"{val} has no class folders" in message


def test_combineall_is_refused(hymenoptera_root):
    with pytest.raises(DatasetFormatError, match="set DATASETS.COMBINEALL False"):
        Hymenoptera(root=hymenoptera_root, combineall=True)


def test_a_reid_config_naming_hymenoptera_is_told_how_to_train_it(hymenoptera_root, monkeypatch):
    monkeypatch.setenv("FASTREID_DATASETS", hymenoptera_root)
    cfg = get_cfg()
    cfg.merge_from_list(["DATASETS.NAMES", ("Hymenoptera",), "MODEL.DEVICE", "cpu"])
    with pytest.raises(DatasetUsageError, match="train it with MODEL.HEADS.NAME ClasHead"):
        build_reid_train_loader(cfg)


def test_classification_dataset_names_the_closest_set():
    assert classification_dataset("Hymenoptera") is Hymenoptera
    with pytest.raises(UnknownDatasetError, match="Did you mean 'Hymenoptera'"):
        classification_dataset("hymenoptera_data")
    with pytest.raises(UnknownDatasetError, match="'Market1501' .* is a data set of another task"):
        classification_dataset("Market1501")


def test_transforms_of_upstreams_config_crop_the_originals(hymenoptera_root):
    cfg = get_cfg()
    cfg.merge_from_list(["INPUT.SIZE_TRAIN", [0], "INPUT.CROP.ENABLED", True, "INPUT.CROP.SIZE", [32]])
    train_set = ClasDataset(Hymenoptera(root=hymenoptera_root).train, build_transforms(cfg, is_train=True))
    assert train_set[0]["images"].shape == (3, 32, 32)
