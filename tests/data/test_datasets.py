"""Dataset parsers on generated folders: counts, relabelling, junk and distractors, errors."""

from __future__ import annotations

import os

import pytest
from PIL import Image

from fastreid.data.datasets import (
    DATASET_REGISTRY,
    MSMT17,
    CustomReID,
    DatasetNotFoundError,
    DukeMTMC,
    Market1501,
    register_folder_dataset,
)


def _touch_images(folder, names):
    os.makedirs(folder, exist_ok=True)
    img = Image.new("RGB", (8, 16), (10, 20, 30))
    for n in names:
        img.save(os.path.join(folder, n))


@pytest.fixture
def market_root(tmp_path):
    base = tmp_path / "Market-1501-v15.09.15"
    _touch_images(
        base / "bounding_box_train",
        [
            "0002_c1s1_000451_03.jpg",
            "0002_c2s1_000551_01.jpg",
            "0007_c3s3_076476_02.jpg",
            "0010_c6s4_002202_01.jpg",
        ],
    )
    _touch_images(base / "query", ["0003_c1s1_001051_00.jpg", "0005_c4s2_004321_00.jpg"])
    _touch_images(
        base / "bounding_box_test",
        [
            "-1_c1s1_000401_03.jpg",
            "0000_c2s1_000301_01.jpg",
            "0003_c2s1_001101_01.jpg",
            "0003_c1s1_001201_01.jpg",
            "0005_c5s2_000101_02.jpg",
        ],
    )
    return tmp_path


def test_market_counts_junk_and_distractors(market_root):
    ds = Market1501(root=str(market_root))
    assert len(ds.train) == 4 and len(ds.query) == 2
    assert len(ds.gallery) == 4  # junk (-1) dropped
    assert sorted({pid for _, pid, _ in ds.gallery}) == [0, 3, 5]  # distractor 0 kept
    assert {cam for _, _, cam in ds.query} == {0, 3}  # 0-based cameras
    assert ds.train[0][1:] == ("market1501_2", "market1501_0")  # upstream's prefixed train labels
    assert ds.num_train_pids == 3
    assert all(os.path.isfile(p) for p, _, _ in ds.train + ds.query + ds.gallery)


def test_market_combineall_adds_test_ids(market_root):
    ds = Market1501(root=str(market_root), combineall=True)
    # 4 train + 2 query + 4 gallery minus the distractor (pid 0 is junk for training)
    assert len(ds.train) == 4 + 2 + 3
    assert "market1501_test_3" in {pid for _, pid, _ in ds.train}


def test_market_alternative_folder_name(tmp_path):
    for d in ("bounding_box_train", "query", "bounding_box_test"):
        _touch_images(tmp_path / "Market-1501" / d, ["0002_c1s1_000451_03.jpg"])
    assert len(Market1501(root=str(tmp_path)).train) == 1


def test_missing_root_names_folder_layout_and_command(tmp_path):
    with pytest.raises(DatasetNotFoundError) as info:
        Market1501(root=str(tmp_path / "nowhere"))
    msg = str(info.value)
    assert "Market-1501-v15.09.15" in msg and "bounding_box_train" in msg
    assert "python -m fastreid.data.synthetic --root" in msg
    assert "FASTREID_DATASETS" in msg


def test_bad_file_name_is_skipped_and_reported(market_root, caplog):
    _touch_images(market_root / "Market-1501-v15.09.15" / "query", ["holiday.jpg"])
    assert len(Market1501(root=str(market_root)).query) == 2
    assert "skipped 1 of 3" in caplog.text and "holiday.jpg" in caplog.text
    for name in os.listdir(market_root / "Market-1501-v15.09.15" / "query"):
        if name != "holiday.jpg":
            os.remove(market_root / "Market-1501-v15.09.15" / "query" / name)
    with pytest.raises(ValueError, match="holiday.jpg"):  # nothing valid left: DatasetFormatError
        Market1501(root=str(market_root)).query  # noqa: B018


def test_duke_and_msmt(tmp_path):
    base = tmp_path / "DukeMTMC-reID"
    _touch_images(base / "bounding_box_train", ["0001_c2_f0046182.jpg", "0001_c8_f0046300.jpg"])
    _touch_images(base / "query", ["0005_c2_f0046985.jpg"])
    _touch_images(base / "bounding_box_test", ["0005_c3_f0047000.jpg"])
    duke = DukeMTMC(root=str(tmp_path))
    assert {c for _, _, c in duke.train} == {"dukemtmc_1", "dukemtmc_7"}

    m = tmp_path / "MSMT17_V1"
    _touch_images(m / "train" / "0000", ["0000_000_01_0303morning_0015_0.jpg"])
    _touch_images(m / "test" / "0000", ["0000_001_05_0303morning_0016_0.jpg"])
    (m / "list_train.txt").write_text("0000/0000_000_01_0303morning_0015_0.jpg 0\n")
    (m / "list_val.txt").write_text("0000/0000_000_01_0303morning_0015_0.jpg 0\n")
    (m / "list_query.txt").write_text("0000/0000_001_05_0303morning_0016_0.jpg 0\n")
    (m / "list_gallery.txt").write_text("0000/0000_001_05_0303morning_0016_0.jpg 0\n")
    msmt = MSMT17(root=str(tmp_path))
    assert msmt.train[0][1:] == ("msmt17_0", "msmt17_0")
    assert msmt.query[0][1:] == (1, 4)  # pid shifted by the number of train ids, camid 0-based
    with pytest.raises(DatasetNotFoundError, match="MSMT17_V1"):
        MSMT17(root=str(tmp_path / "none"))


def test_custom_lists_and_folders(tmp_path):
    folder = tmp_path / "custom"
    _touch_images(folder / "imgs", ["a.jpg", "b.jpg", "c.jpg"])
    (folder / "train.txt").write_text("imgs/a.jpg 7 0\nimgs/b.jpg 7 1  # comment\n")
    (folder / "query.txt").write_text("imgs/c.jpg 3 0\n")
    (folder / "gallery.txt").write_text("imgs/a.jpg 3 1\nimgs/b.jpg -1 1\n")
    ds = CustomReID(root=str(tmp_path))
    assert [x[1] for x in ds.train] == ["custom_7", "custom_7"]
    assert len(ds.gallery) == 1

    (folder / "gallery.txt").write_text("imgs/a.jpg three 1\n")
    with pytest.raises(ValueError, match=r"gallery.txt:1"):
        CustomReID(root=str(tmp_path)).gallery  # noqa: B018

    other = tmp_path / "shop"
    for d, n in (("train", "0001_c1_x.jpg"), ("query", "0002_c1_y.jpg"), ("gallery", "0002_c2_z.jpg")):
        _touch_images(other / d, [n])
    cls = register_folder_dataset("ShopReIDTest", "shop")
    assert DATASET_REGISTRY.get("ShopReIDTest") is cls
    shop = cls(root=str(tmp_path))
    assert shop.train[0][1] == "shopreidtest_1" and shop.gallery[0][1:] == (2, 1)


def test_registry_has_builtin_names():
    for name in ("Market1501", "DukeMTMC", "MSMT17", "CUHK03", "CustomReID"):
        assert DATASET_REGISTRY.get(name) is not None


def test_show_summary_logs_table(market_root, caplog):
    import logging

    ds = Market1501(root=str(market_root))
    with caplog.at_level(logging.INFO, logger="fastreid.data.datasets.bases"):
        ds.show_train()
        ds.show_test()
    text = caplog.text
    assert "# ids" in text and "query" in text and "gallery" in text


def test_market_500k_distractors(market_root):
    _touch_images(
        market_root / "Market-1501-v15.09.15" / "images", ["0000_c1s1_999999_01.jpg", "0000_c3s1_1_01.jpg"]
    )
    assert len(Market1501(root=str(market_root), market1501_500k=True).gallery) == 4 + 2
    assert len(Market1501(root=str(market_root)).gallery) == 4


def test_cuhk03_from_split_json(tmp_path):
    import json

    from fastreid.data.datasets import CUHK03

    base = tmp_path / "cuhk03"
    _touch_images(base / "images_labeled", ["1_001_1_01.png", "1_001_2_06.png", "1_002_1_01.png"])
    split = {
        "train": [["images_labeled/1_001_1_01.png", 0, 0], ["images_labeled/1_001_2_06.png", 0, 1]],
        "query": [["images_labeled/1_002_1_01.png", 5, 0]],
        "gallery": [["images_labeled/1_002_1_01.png", 5, 1]],
    }
    (base / "splits_new_labeled.json").write_text(json.dumps([split]))
    ds = CUHK03(root=str(tmp_path))
    assert ds.train[1][1:] == ("cuhk03_0", "cuhk03_1") and os.path.isfile(ds.train[0][0])
    assert ds.query[0][1:] == (5, 0)
    with pytest.raises(DatasetNotFoundError, match="cuhk-03.mat"):
        CUHK03(root=str(tmp_path), cuhk03_labeled=False)  # no detected split, no .mat to extract from


def _fake_cuhk03_release(base, h5py, np, sio):
    """cuhk-03.mat (MATLAB v7.3 / HDF5 with object references, as released) with 2 camera pairs of
    3 persons, images 1, 2 (view 1) and 6, 7 (view 2) present, the rest empty cells; 2 classic test
    sets; and the new-protocol config .mat files (scipy format)."""
    os.makedirs(base / "cuhk03_release")
    names = []
    with h5py.File(base / "cuhk03_release" / "cuhk-03.mat", "w") as f:
        for kind in ("labeled", "detected"):
            pair_refs = []
            for pair in range(2):
                cells = np.empty(
                    (10, 3), dtype=h5py.ref_dtype
                )  # MATLAB's column order: .T gives persons x 10
                for pid in range(3):
                    for img in range(10):
                        key = f"/imgs/{kind}/{pair}/{pid}/{img}"
                        if img in (0, 1, 5, 6):
                            data = np.full((3, 4, 8), 10 * pid + img, np.uint8)  # .T: 8 x 4 x 3 (H, W, RGB)
                            if kind == "labeled":
                                names.append(
                                    f"{pair + 1}_{pid + 1:03d}_{1 if img < 5 else 2}_{img + 1:02d}.png"
                                )
                        else:
                            data = np.zeros(2, np.uint64)  # an empty cell
                        cells[img, pid] = f.create_dataset(key, data=data).ref
                pair_refs.append(f.create_dataset(f"/cells/{kind}/{pair}", data=cells).ref)
            f.create_dataset(kind, data=np.array([pair_refs], dtype=h5py.ref_dtype))
        tests = [
            f.create_dataset(f"/tests/{i}", data=np.array(pairs, np.float64).T).ref
            for i, pairs in enumerate(([[1, 2], [2, 3]], [[1, 1], [2, 1]]))
        ]
        f.create_dataset("testsets", data=np.array([tests], dtype=h5py.ref_dtype))
    labels = np.array([[(int(n[0]) - 1) * 3 + int(n[2:5])] for n in names])  # person number 1..6
    filelist = np.empty((len(names), 1), dtype=object)
    for i, n in enumerate(names):
        filelist[i, 0] = np.array([n])
    idx = np.arange(1, len(names) + 1)
    train = idx[labels[:, 0] <= 3]
    test = idx[labels[:, 0] > 3]
    for kind in ("labeled", "detected"):
        sio.savemat(
            str(base / f"cuhk03_new_protocol_config_{kind}.mat"),
            {
                "labels": labels,
                "filelist": filelist,
                "train_idx": train[:, None],
                "query_idx": test[::4, None],
                "gallery_idx": np.setdiff1d(test, test[::4])[:, None],
            },
        )


def test_cuhk03_extracted_from_the_released_mat_files(tmp_path):
    h5py = pytest.importorskip("h5py")
    sio = pytest.importorskip("scipy.io")
    import numpy as np

    from fastreid.data.datasets import CUHK03

    base = tmp_path / "cuhk03"
    _fake_cuhk03_release(base, h5py, np, sio)
    ds = CUHK03(root=str(tmp_path))  # new protocol, labeled: extracts on first use
    assert len(os.listdir(base / "images_labeled")) == 2 * 3 * 4
    assert len(ds.train) == 12 and ds.num_train_pids == 3
    assert sorted({pid for _, pid, _ in ds.train}) == ["cuhk03_0", "cuhk03_1", "cuhk03_2"]
    assert len(ds.query) == 3 and len(ds.query) + len(ds.gallery) == 12
    assert {cam for _, _, cam in ds.query + ds.gallery} == {0, 1}
    with Image.open(ds.query[0][0]) as im:
        assert im.size == (4, 8)  # width 4, height 8: the .mat's H x W x 3 after transposing
    assert os.path.isfile(base / "splits_new_detected.json")

    classic = CUHK03(root=str(tmp_path), cuhk03_classic_split=True, split_id=1)
    assert len(classic.train) == 4 * 4 and len(classic.query) == 2 * 4
    assert classic.query == classic.gallery and sorted({p for _, p, _ in classic.query}) == [0, 1]
    assert CUHK03(root=str(tmp_path), cuhk03_labeled=False, cuhk03_classic_split=True).train
    with open(base / "splits_new_labeled.json") as f:
        before = f.read()
    CUHK03(root=str(tmp_path))  # a second use reads the files written the first time
    with open(base / "splits_new_labeled.json") as f:
        assert f.read() == before
