"""The attribute data sets read upstream's layouts with upstream's label conventions, and every
bad input is one error naming the file and the fix: a missing folder or annotation file, label
counts that do not match the attribute names or the other split, an identity the attribute file
does not list, an attribute set given to a re-ID loader, an unknown attribute set name."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from attr_trees import write_identity_attribute_tree

from fastreid.data.datasets import UnknownDatasetError
from fastreid.data.datasets.bases import DatasetFormatError, DatasetNotFoundError, DatasetUsageError
from fastreid.data.loading.seeds import SampleKey
from fastreid.data.synthetic.attributes import ATTRIBUTES
from fastreid.projects.attr import PA100K, AttrDataset, DukeMTMCAttr, Market1501Attr
from fastreid.projects.attr.trainer import attribute_dataset


def test_pa100k_reads_the_synthetic_set(pa100k_root):
    ds = PA100K(root=pa100k_root)
    assert (len(ds.train), len(ds.val), len(ds.test)) == (48, 8, 16)
    assert [ds.attr_dict[i] for i in range(26)] == list(ATTRIBUTES) and ds.num_attrs == 26
    path, labels = ds.train[0]
    assert path == os.path.join(pa100k_root, "PA-100K", "data", "000001.jpg") and os.path.isfile(path)
    assert labels.dtype == np.float32 and labels.shape == (26,) and set(np.unique(labels)) <= {0.0, 1.0}
    assert ds.test[0][0].endswith("000057.jpg")  # the names of the file: train, then val, then test
    assert len(ds) == 48 and ds.data is ds.train  # upstream's mode "train"
    assert len(PA100K(root=pa100k_root, mode="test")) == 16


def test_pa100k_missing_is_one_error_with_the_layout_and_the_synthetic_command(tmp_path):
    with pytest.raises(DatasetNotFoundError) as e:
        PA100K(root=str(tmp_path))
    message = str(e.value)
    assert str(tmp_path / "PA-100K" / "data") in message
    assert "python -m fastreid.data.synthetic.attributes --root" in message and "\n" not in message


def _pa100k_mat(tmp_path, **override):
    from scipy.io import savemat

    folder = tmp_path / "PA-100K"
    (folder / "data").mkdir(parents=True)

    def cells(values):
        out = np.empty((len(values), 1), dtype=object)
        out[:, 0] = values
        return out

    mat = {"attributes": cells(["a", "b", "c"])}
    for split, n in (("train", 4), ("val", 2), ("test", 2)):
        mat[f"{split}_images_name"] = cells([f"{split}{i}.jpg" for i in range(n)])
        mat[f"{split}_label"] = np.ones((n, 3), dtype=np.uint8)
    mat.update(override)
    for key in [k for k, v in mat.items() if v is None]:
        del mat[key]
    savemat(str(folder / "annotation.mat"), mat)
    return str(folder / "annotation.mat")


def test_pa100k_label_columns_must_match_the_attributes(tmp_path):
    path = _pa100k_mat(tmp_path, val_label=np.ones((2, 4), dtype=np.uint8))
    with pytest.raises(DatasetFormatError, match="one column per attribute") as e:
        PA100K(root=str(tmp_path))
    assert (
        path in str(e.value) and "val_label has 4 columns" in str(e.value) and "3 attributes" in str(e.value)
    )


def test_pa100k_rows_must_match_the_names_and_keys_must_be_there(tmp_path):
    _pa100k_mat(tmp_path, test_label=np.ones((3, 3), dtype=np.uint8))
    with pytest.raises(DatasetFormatError, match="test_label has 3 rows but test_images_name 2"):
        PA100K(root=str(tmp_path))
    other = tmp_path / "other"
    other.mkdir()
    _pa100k_mat(other, attributes=None)
    with pytest.raises(DatasetFormatError, match="has no attributes"):
        PA100K(root=str(other))


def test_pa100k_unreadable_annotation_names_the_file(tmp_path):
    folder = tmp_path / "PA-100K"
    (folder / "data").mkdir(parents=True)
    (folder / "annotation.mat").write_bytes(b"not a mat file at all" * 10)
    with pytest.raises(DatasetFormatError, match="annotation.mat"):
        PA100K(root=str(tmp_path))


MARKET_TRAIN = {"image_index": ["0002", "0007"], "age": [2, 4], "backpack": [1, 2], "upred": [2, 1]}
MARKET_TEST = {"image_index": ["0003"], "age": [1], "backpack": [2], "upred": [2]}
MARKET_IMAGES = {
    "train": ["0002_c1s1_000451_03.jpg", "0007_c2s3_070952_01.jpg", "0007_c6s1_000051_01.jpg"],
    "test": ["0003_c1s6_015971_00.jpg", "0000_c1s1_000151_01.jpg", "-1_c2s1_000801_02.jpg"],
}


def _market(root, train=MARKET_TRAIN, test=MARKET_TEST, images=MARKET_IMAGES):
    folder = os.path.join(str(root), "Market-1501-v15.09.15")
    write_identity_attribute_tree(folder, "market_attribute.mat", "market_attribute", train, test, images)
    return folder


def test_market1501attr_labels_are_the_identitys_values_minus_one_in_sorted_attribute_order(tmp_path):
    folder = _market(tmp_path)
    ds = Market1501Attr(root=str(tmp_path))
    assert ds.attr_dict == {0: "age", 1: "backpack", 2: "upred"}
    train = {os.path.basename(p): labels.tolist() for p, labels in ds.train}
    assert train == {
        "0002_c1s1_000451_03.jpg": [1.0, 0.0, 1.0],
        "0007_c2s3_070952_01.jpg": [3.0, 1.0, 0.0],  # Market's age 1..4 becomes 0..3, as upstream
        "0007_c6s1_000051_01.jpg": [3.0, 1.0, 0.0],
    }
    assert [os.path.basename(p) for p, _ in ds.test] == [
        "0003_c1s6_015971_00.jpg"
    ]  # junk and distractors out
    assert ds.val is ds.test and ds.train[0][0].startswith(folder)


def test_market1501attr_splits_with_different_attributes_are_one_error(tmp_path):
    test = {k: v for k, v in MARKET_TEST.items() if k != "upred"}
    _market(tmp_path, test=test)
    with pytest.raises(DatasetFormatError, match="train split has 3 attributes and the test split 2") as e:
        Market1501Attr(root=str(tmp_path))
    assert "market_attribute.mat" in str(e.value) and "only in train: upred" in str(e.value)


def test_market1501attr_values_per_identity_must_match_the_index(tmp_path):
    train = dict(MARKET_TRAIN, backpack=[1, 2, 1])
    _market(tmp_path, train=train)
    with pytest.raises(DatasetFormatError, match="backpack has 3 values for 2 identities"):
        Market1501Attr(root=str(tmp_path))


def test_market1501attr_identity_missing_from_the_file_names_it(tmp_path):
    images = dict(MARKET_IMAGES, train=[*MARKET_IMAGES["train"], "0011_c3s1_000001_01.jpg"])
    _market(tmp_path, images=images)
    with pytest.raises(DatasetFormatError, match="no attributes for identity 0011") as e:
        Market1501Attr(root=str(tmp_path))
    assert "market_attribute.mat" in str(e.value) and "0011_c3s1_000001_01.jpg" in str(e.value)


def test_market1501attr_without_its_attribute_file_says_where_it_goes(tmp_path):
    folder = _market(tmp_path)
    os.remove(os.path.join(folder, "market_attribute.mat"))
    with pytest.raises(DatasetNotFoundError, match="market_attribute.mat") as e:
        Market1501Attr(root=str(tmp_path))
    assert "vana77/Market-1501_Attribute" in str(e.value)


def test_dukemtmcattr_reads_its_layout(tmp_path):
    train = {"image_index": ["0001", "0005"], "boots": [1, 2], "top": [2, 2]}
    test = {"image_index": ["0019"], "boots": [2], "top": [1]}
    images = {"train": ["0001_c2_f0046182.jpg", "0005_c8_f0000001.jpg"], "test": ["0019_c1_f0000002.jpg"]}
    write_identity_attribute_tree(
        str(tmp_path / "DukeMTMC-reID"), "duke_attribute.mat", "duke_attribute", train, test, images
    )
    ds = DukeMTMCAttr(root=str(tmp_path))
    assert ds.attr_dict == {0: "boots", 1: "top"}
    assert [labels.tolist() for _, labels in ds.train] == [[0.0, 1.0], [1.0, 1.0]]
    assert [labels.tolist() for _, labels in ds.test] == [[1.0, 0.0]]


def test_an_attribute_set_in_a_reid_loader_says_how_to_train_it(pa100k_root, monkeypatch):
    from fastreid.config import get_cfg
    from fastreid.data.build import build_reid_test_loader, build_reid_train_loader

    monkeypatch.setenv("FASTREID_DATASETS", pa100k_root)
    cfg = get_cfg()
    cfg.merge_from_list(["DATASETS.NAMES", ("PA100K",), "DATASETS.TESTS", ("PA100K",), "MODEL.DEVICE", "cpu"])
    with pytest.raises(DatasetUsageError, match="PA100K is a data set for attribute recognition") as e:
        build_reid_train_loader(cfg)
    assert "AttrBaseline" in str(e.value) and "configs/Attr/pa100.yml" in str(e.value)
    with pytest.raises(DatasetUsageError, match="attribute"):
        build_reid_test_loader(cfg, dataset_name="PA100K")
    with pytest.raises(DatasetUsageError, match="no query/gallery"):
        _ = PA100K(root=pa100k_root).query


def test_unknown_attribute_set_names_the_closest():
    with pytest.raises(UnknownDatasetError, match="Did you mean 'PA100K'") as e:
        attribute_dataset("PA-100K")
    assert "not a registered data set" in str(e.value)
    assert "PA100K" in str(e.value) and "DukeMTMCAttr" in str(e.value)
    with pytest.raises(UnknownDatasetError, match="a re-ID data set.*Did you mean 'Market1501Attr'"):
        attribute_dataset("Market1501")
    assert attribute_dataset("PA100K") is PA100K


def test_attr_dataset_items_and_sample_weights(pa100k_root):
    ds = PA100K(root=pa100k_root)
    data = AttrDataset(ds.train, None, ds.attr_dict)
    item = data[SampleKey(3, 7)]
    assert item["images"].dtype == torch.uint8 and item["images"].shape == (3, 128, 64)
    assert item["targets"].dtype == torch.float32 and torch.equal(
        item["targets"], torch.from_numpy(ds.train[3][1])
    )
    assert item["img_paths"] == ds.train[3][0] and data.num_classes == 26
    expected = torch.from_numpy(np.stack([labels for _, labels in ds.train]).mean(axis=0))
    assert torch.allclose(data.sample_weights, expected)
