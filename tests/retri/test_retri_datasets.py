"""The retrieval data sets read upstream's layouts under upstream's names (CUB, Cars196, SOP,
InShop) as upstream does (prefixed training labels, the test list as query with no gallery, or
In-Shop's query and gallery lists), and stop on bad input with one line naming the file and the fix."""

from __future__ import annotations

import os

import pytest

from fastreid.data.datasets import DATASET_REGISTRY
from fastreid.data.datasets.bases import DatasetFormatError, DatasetNotFoundError
from fastreid.projects.retri import CUB, SOP, Cars196, InShop, read_label_file

TRAIN = [("images/a/1.jpg", 1), ("images/a/2.jpg", 1), ("images/b/1.jpg", 2)]
TEST = [("images/c/1.jpg", 3), ("images/c/2.jpg", 3), ("images/d/1.jpg", 4)]


def test_upstreams_names_are_registered():
    for name, cls in {"CUB": CUB, "Cars196": Cars196, "SOP": SOP, "InShop": InShop}.items():
        assert DATASET_REGISTRY.get(name) is cls


@pytest.mark.parametrize(
    "cls, folder", [(CUB, "CUB_200_2011"), (Cars196, "Cars_196"), (SOP, "Stanford_Online_Products")]
)
def test_train_and_test_lists(cls, folder, write_lists):
    root = write_lists(folder, {"train.txt": TRAIN, "test.txt": TEST})
    data = cls(root=root)
    base = os.path.join(root, folder)
    prefix = cls.dataset_name
    assert data.train == [(os.path.join(base, p), f"{prefix}_{label}", "0") for p, label in TRAIN]
    assert data.query == [(os.path.join(base, p), str(label), "0") for p, label in TEST]
    assert data.gallery == []
    assert data.num_train_pids == 2


def test_inshop_has_a_query_and_a_gallery_list(write_lists):
    query = [("img/q1.jpg", 3), ("img/q2.jpg", 4)]
    gallery = [("img/g1.jpg", 3), ("img/g2.jpg", 4), ("img/g3.jpg", 4)]
    root = write_lists("InShop", {"train.txt": TRAIN, "test_query.txt": query, "test_gallery.txt": gallery})
    data = InShop(root=root)
    assert [item[1] for item in data.train] == ["inshop_1", "inshop_1", "inshop_2"]
    assert [item[1] for item in data.query] == ["3", "4"]
    assert [item[1] for item in data.gallery] == ["3", "4", "4"]


def test_the_synthetic_cub_reads(cub_root):
    data = CUB(root=cub_root)
    train_classes = {item[1] for item in data.train}
    test_classes = {item[1] for item in data.query}
    assert len(train_classes) == 6 and len(test_classes) == 6
    assert all(os.path.isfile(item[0]) for item in data.train + data.query)
    assert test_classes == {str(c) for c in range(7, 13)}


def test_a_missing_folder_or_list_names_it_and_the_synthetic_command(tmp_path, write_lists):
    with pytest.raises(DatasetNotFoundError) as info:
        CUB(root=str(tmp_path))
    message = str(info.value)
    assert os.path.join(str(tmp_path), "CUB_200_2011") in message.splitlines()[0]
    assert "python -m fastreid.data.synthetic.retrieval" in message
    root = write_lists("InShop", {"train.txt": TRAIN, "test_query.txt": TEST})
    with pytest.raises(DatasetNotFoundError, match="test_gallery.txt"):
        InShop(root=root)


def test_a_class_in_both_splits_is_refused(write_lists):
    root = write_lists("CUB_200_2011", {"train.txt": TRAIN, "test.txt": [*TEST, ("images/e/1.jpg", 2)]})
    with pytest.raises(DatasetFormatError) as info:
        CUB(root=root)
    message = str(info.value)
    assert "\n" not in message
    assert "class '2'" in message and "train.txt" in message and "test.txt" in message
    assert "give the test images their own classes" in message


def test_a_class_in_both_train_and_inshop_gallery_is_refused(write_lists):
    lists = {"train.txt": TRAIN, "test_query.txt": TEST, "test_gallery.txt": [("img/g.jpg", 1)]}
    with pytest.raises(DatasetFormatError, match="class '1' is in both .*train.txt and .*test_gallery.txt"):
        InShop(root=write_lists("InShop", lists))


def test_a_malformed_line_names_file_and_line(write_lists):
    root = write_lists("CUB_200_2011", {"train.txt": TRAIN, "test.txt": TEST})
    path = os.path.join(root, "CUB_200_2011", "test.txt")
    with open(path, "a") as f:
        f.write("images/c/3.jpg 3\n")
    with pytest.raises(DatasetFormatError) as info:
        CUB(root=root)
    message = str(info.value)
    assert "\n" not in message and f"{path}, line 4" in message and "'<image path>,<class label>'" in message


def test_a_missing_image_names_the_list_line(write_lists):
    root = write_lists("Cars_196", {"train.txt": TRAIN, "test.txt": TEST})
    os.remove(os.path.join(root, "Cars_196", "images", "b", "1.jpg"))
    with pytest.raises(
        DatasetFormatError, match=r"train.txt, line 3: image not found: .*b.1\.jpg: put the image"
    ):
        Cars196(root=root)


def test_an_empty_list_is_refused(write_lists):
    root = write_lists("Stanford_Online_Products", {"train.txt": TRAIN, "test.txt": []})
    with pytest.raises(DatasetFormatError, match="test.txt lists no image"):
        SOP(root=root)


def test_read_label_file_splits_at_the_last_comma(tmp_path):
    (tmp_path / "a,b.jpg").write_bytes(b"")
    (tmp_path / "list.txt").write_text("\na,b.jpg, 7 \n\n")
    assert read_label_file(str(tmp_path / "list.txt"), str(tmp_path)) == [(str(tmp_path / "a,b.jpg"), "7", 2)]


def test_inshop_queries_without_gallery_images_are_a_warning(write_lists, caplog):
    query = [("img/q1.jpg", 3), ("img/q2.jpg", 5)]
    lists = {"train.txt": TRAIN, "test_query.txt": query, "test_gallery.txt": [("img/g1.jpg", 3)]}
    InShop(root=write_lists("InShop", lists))
    assert "1 class(es) of" in caplog.text and "'5'" in caplog.text
