"""Every upstream data set name: parsed from a tiny tree in its published layout (ids, cameras,
relabelling, counts), plus the missing-root, malformed-name, empty-folder and misuse messages,
and every config in configs/ that names a data set."""

from __future__ import annotations

import logging
import os

import pytest
from dataset_layouts import BAD_ENTRY, LAYOUTS, touch
from shipped_configs import reid_configs

from fastreid.config import get_cfg
from fastreid.data.common import CommDataset
from fastreid.data.datasets import (
    DATASET_REGISTRY,
    UPSTREAM_NAMES,
    DatasetFormatError,
    DatasetNotFoundError,
    DatasetUsageError,
    UnknownDatasetError,
)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _named(items):
    return sorted((os.path.basename(p), pid, cam) for p, pid, cam in items)


def test_every_upstream_name_is_registered_and_has_a_layout_fixture():
    assert len(UPSTREAM_NAMES) == 30
    for name in UPSTREAM_NAMES:
        assert DATASET_REGISTRY.get(name).__name__ == name
    assert set(LAYOUTS) == set(UPSTREAM_NAMES)


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_parses_published_layout(name, layout_root):
    root, expected = layout_root(name)
    ds = DATASET_REGISTRY.get(name)(root=root)
    assert _named(ds.train) == sorted(expected["train"])
    assert all(os.path.isfile(p) for p, _, _ in ds.train)
    assert ds.num_train_pids == len({pid for _, pid, _ in expected["train"]})
    if ds.train_only:
        assert "query" not in expected
        with pytest.raises(DatasetUsageError, match="training-only"):
            ds.query  # noqa: B018
        with pytest.raises(DatasetUsageError, match="DATASETS.TESTS"):
            ds.show_test()
        return
    if "query" in expected:
        assert _named(ds.query) == sorted(expected["query"])
        assert _named(ds.gallery) == sorted(expected["gallery"])
    else:
        assert len(ds.query) == expected["query_count"] and len(ds.gallery) == expected["gallery_count"]
    assert all(isinstance(pid, int) and isinstance(cam, int) for _, pid, cam in ds.query + ds.gallery)
    assert all(os.path.isfile(p) for p, _, _ in ds.query + ds.gallery)


@pytest.mark.parametrize("name", sorted(n for n, bad in BAD_ENTRY.items() if bad is not None))
def test_malformed_entry_is_skipped_with_a_count(name, layout_root, caplog):
    root, expected = layout_root(name)
    bad = BAD_ENTRY[name](root)
    with caplog.at_level(logging.WARNING, logger="fastreid.data.datasets.parsing"):
        ds = DATASET_REGISTRY.get(name)(root=root)
        train = ds.train
    assert _named(train) == sorted(expected["train"])
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "skipped 1 of" in warnings[0] and bad in warnings[0], warnings


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_missing_root_names_folder_layout_env_and_source(name, tmp_path):
    cls = DATASET_REGISTRY.get(name)
    with pytest.raises(DatasetNotFoundError) as info:
        cls(root=str(tmp_path / "nowhere")).train  # noqa: B018
    msg = str(info.value)
    assert str(tmp_path / "nowhere") in msg
    assert "FASTREID_DATASETS" in msg and "Expected layout" in msg
    assert "published at" in msg and cls.url and cls.url in msg
    assert "{root}" not in msg


def test_nothing_valid_left_is_an_error_naming_the_file(tmp_path):
    touch(tmp_path / "PKUv1a_128x48", "holiday.png", "notes.png")
    with pytest.raises(DatasetFormatError, match="none of the 2 entries") as info:
        DATASET_REGISTRY.get("PKU")(root=str(tmp_path)).train  # noqa: B018
    assert "holiday.png" in str(info.value) and "<pid>_<camera>" in str(info.value)


def test_empty_train_folder_is_one_clear_error(tmp_path):
    for d in ("bounding_box_train", "bounding_box_test", "query"):
        os.makedirs(tmp_path / "Market-1501-v15.09.15" / d)
    with pytest.raises(DatasetFormatError, match="no images in .*bounding_box_train"):
        DATASET_REGISTRY.get("Market1501")(root=str(tmp_path)).train  # noqa: B018
    os.makedirs(tmp_path / "thermalworld_rgb")
    with pytest.raises(DatasetFormatError, match="no images in"):
        DATASET_REGISTRY.get("Thermalworld")(root=str(tmp_path)).train  # noqa: B018


@pytest.mark.skipif(os.name == "nt" or os.geteuid() == 0, reason="permissions are not enforced here")
def test_unreadable_train_folder_is_one_clear_error(tmp_path):
    _ = LAYOUTS["VeRi"](str(tmp_path))
    folder = tmp_path / "veri" / "image_train"
    folder.chmod(0)
    try:
        with pytest.raises(DatasetNotFoundError, match="cannot read the folder"):
            DATASET_REGISTRY.get("VeRi")(root=str(tmp_path)).train  # noqa: B018
    finally:
        folder.chmod(0o755)


def test_unreadable_folder_message_without_real_permissions(tmp_path, monkeypatch):
    """The same check where permissions are not enforced (root, Windows): listing fails with EACCES."""
    from fastreid.data.datasets import parsing

    LAYOUTS["VeRi"](str(tmp_path))
    blocked = os.path.join(str(tmp_path), "veri", "image_train")
    real_listdir = os.listdir

    def listdir(path="."):
        if os.path.abspath(path) == os.path.abspath(blocked):
            raise PermissionError(13, "Permission denied", path)
        return real_listdir(path)

    monkeypatch.setattr(parsing.os, "listdir", listdir)
    with pytest.raises(DatasetNotFoundError, match="cannot read the folder .*image_train .Permission denied"):
        DATASET_REGISTRY.get("VeRi")(root=str(tmp_path)).train  # noqa: B018


def test_unknown_name_lists_the_registered_ones():
    with pytest.raises(UnknownDatasetError, match="Did you mean 'VeRi'") as info:
        DATASET_REGISTRY.get("veri")
    assert "Market1501" in str(info.value) and isinstance(info.value, KeyError)


def test_training_only_set_as_test_set_is_a_clear_error(layout_root, monkeypatch):
    from fastreid.data.build import build_reid_test_loader

    root, _ = layout_root("GRID")
    monkeypatch.setenv("FASTREID_DATASETS", root)
    cfg = get_cfg()
    cfg.merge_from_list(["DATASETS.TESTS", "('GRID',)", "MODEL.DEVICE", "cpu", "INPUT.SIZE_TEST", "[16, 8]"])
    with pytest.raises(DatasetUsageError, match="GRID is a training-only data set"):
        build_reid_test_loader(cfg, "GRID")


def test_combined_training_relabels_as_upstream(layout_root):
    """Upstream relabels the union of the prefixed pid strings in sorted order."""
    names = ("Market1501", "GRID", "VIPeR", "VeRi")
    items = []
    for name in names:
        root, _ = layout_root(name)
        items += DATASET_REGISTRY.get(name)(root=root).train
    ds = CommDataset(items, None, relabel=True)
    upstream_pids = sorted({pid for _, pid, _ in items})
    assert ds.pids == upstream_pids
    assert ds.pids[:3] == ["grid_0000", "grid_0001", "market1501_2"]
    for (_, pid, cam), (_, label, cam_label) in zip(items, ds.img_items):
        assert ds.pids[label] == pid and ds.cams[cam_label] == cam
    assert ds.num_classes == 2 + 2 + 2 + 2


def test_combineall_adds_test_identities_and_train_only_sets_ignore_it(layout_root):
    root, expected = layout_root("VeRi")
    ds = DATASET_REGISTRY.get("VeRi")(root=root, combineall=True)
    assert len(ds.train) == len(expected["train"]) + 3
    assert "veri_test_3" in {pid for _, pid, _ in ds.train}
    root, expected = layout_root("VIPeR")
    assert len(DATASET_REGISTRY.get("VIPeR")(root=root, combineall=True).train) == len(expected["train"])


@pytest.mark.parametrize(
    "alias, name, probe",
    [
        ("market1501/Market-1501-v15.09.15", "Market1501", "bounding_box_train"),
        ("Market-1501", "Market1501", "bounding_box_train"),
        ("dukemtmc-reid/DukeMTMC-reID", "DukeMTMC", "bounding_box_train"),
        ("msmt17/MSMT17_V1", "MSMT17", "list_train.txt"),
        ("VeRi", "VeRi", "image_train"),
        ("VehicleID_V1.0", "VehicleID", "train_test_split"),
        ("viper/VIPeR", "VIPeR", "cam_a"),
        ("sensereid/SenseReID", "SenseReID", "test_gallery"),
        ("cuhksysu", "cuhkSYSU", "cropped_images"),
    ],
)
def test_torchreid_and_published_folder_names(alias, name, probe, tmp_path, caplog):
    """The tree under another accepted folder name parses the same, and the log says which was used."""
    staging = tmp_path / "staging"
    expected = LAYOUTS[name](str(staging))
    (top,) = os.listdir(staging)
    src = staging / top
    if not (src / probe).exists():  # the data set folder is one level deeper (e.g. cuhk_sysu/cropped_images)
        (src,) = [src / d for d in os.listdir(src)]
        src = src.parent
    dst = tmp_path / "datasets" / alias
    dst.parent.mkdir(parents=True, exist_ok=True)
    os.rename(src, dst)
    with caplog.at_level(logging.INFO, logger="fastreid.data.datasets.bases"):
        ds = DATASET_REGISTRY.get(name)(root=str(tmp_path / "datasets"))
    assert _named(ds.train) == sorted(expected["train"])
    assert any(str(dst) in r.getMessage() and "alias" in r.getMessage() for r in caplog.records)


def test_grid_as_published_probe_and_gallery(tmp_path):
    base = tmp_path / "grid" / "underground_reid"
    touch(base / "probe", "0001_1_25004_107_32_130.jpeg")
    touch(base / "gallery", "0001_5_25020_190_33_140.jpeg", "0000_3_25100_80_30_120.jpeg")
    ds = DATASET_REGISTRY.get("GRID")(root=str(tmp_path))
    assert sorted(pid for _, pid, _ in ds.train) == ["grid_0000", "grid_0001", "grid_0001"]


def test_sensereid_test_probe_spelling(tmp_path):
    touch(tmp_path / "SenseReID" / "test_gallery", "0000001_01.jpg")
    touch(tmp_path / "SenseReID" / "test_probe", "0000001_00.jpg")
    assert len(DATASET_REGISTRY.get("SenseReID")(root=str(tmp_path)).train) == 2


def test_vehicleid_split_is_seeded_and_one_gallery_image_per_vehicle(layout_root):
    root, _ = layout_root("SmallVehicleID")
    a = DATASET_REGISTRY.get("SmallVehicleID")(root=root)
    b = DATASET_REGISTRY.get("SmallVehicleID")(root=root)
    assert a.query == b.query and a.gallery == b.gallery
    assert sorted(pid for _, pid, _ in a.gallery) == [7, 9]
    assert sorted(pid for _, pid, _ in a.query) == [7, 7, 9]
    assert len({cam for _, _, cam in a.query + a.gallery}) == 5  # cameras are image ids, as upstream
    other = DATASET_REGISTRY.get("SmallVehicleID")(root=root, split_seed=1)
    assert sorted(other.query + other.gallery) == sorted(a.query + a.gallery)


def test_vehicle_test_sizes_read_their_own_lists(layout_root):
    root, _ = layout_root("VeRiWild")
    split = os.path.join(root, "VERI-Wild", "train_test_split")
    with open(os.path.join(split, "test_5000.txt"), "a") as f:
        f.write("00001/000001\n")
    assert len(DATASET_REGISTRY.get("SmallVeRiWild")(root=root).gallery) == 1
    assert len(DATASET_REGISTRY.get("MediumVeRiWild")(root=root).gallery) == 2
    assert DATASET_REGISTRY.get("LargeVeRiWild")(root=root).query_list.endswith("test_10000_query.txt")


def _configs_naming_datasets():
    out = []
    for rel in reid_configs():  # a task family's data sets: its own tests
        path = os.path.join(REPO, rel)
        cfg = get_cfg()
        cfg.merge_from_file(path)
        if not os.path.basename(path).startswith("Base-"):
            out.append((os.path.relpath(path, REPO), tuple(cfg.DATASETS.NAMES), tuple(cfg.DATASETS.TESTS)))
    return out


@pytest.mark.parametrize("config, names, tests", _configs_naming_datasets(), ids=lambda v: str(v))
def test_every_config_dataset_parses(config, names, tests, tmp_path):
    root = str(tmp_path)
    for name in set(names) | set(tests):
        LAYOUTS[name](root)
    for name in names:
        assert DATASET_REGISTRY.get(name)(root=root).train, (config, name)
    for name in tests:
        ds = DATASET_REGISTRY.get(name)(root=root)
        assert ds.query and ds.gallery, (config, name)
