"""The shared parser of the training-only sets: the Field rules, the image trees, and a set declared
only by its table entries (every registered set is checked in test_datasets_all.py)."""

from __future__ import annotations

import logging
import os

import pytest
from dataset_layouts import touch

from fastreid.data.datasets import DatasetNotFoundError
from fastreid.data.datasets.parsing import MalformedEntryError
from fastreid.data.datasets.train_only_base import Field, TrainOnlySet, list_tree


def test_field_rules_read_the_parts_of_a_path():
    path = os.path.join("root", "scen1", "view2", "0007", "c3_12-a-b.png")
    assert Field()(path) == "c3_12-a-b.png"
    assert Field(level=1)(path) == "0007"
    assert Field(level=3)(path) == "scen1"
    assert Field(sep="_", index=1)(path) == "12-a-b.png"
    assert Field(sep="-", index=2)(path) == "b.png"
    assert Field(sep="_", first=True)(path) == "c3"
    assert Field(sep="_", index=0)("x.png") == "x.png"  # field 1 is the whole name without a separator
    with pytest.raises(MalformedEntryError, match="no '_' in the name"):
        Field(sep="_", first=True)("x.png")  # ... but "the part before" needs the separator
    with pytest.raises(MalformedEntryError, match="no field 3 separated by '-'"):
        Field(sep="-", index=2)("a-b.png")
    with pytest.raises(MalformedEntryError, match="no field 1"):
        Field(sep="_", index=0)("_x.png")


def test_image_trees(tmp_path):
    root = str(tmp_path)
    touch(root, "top.jpg", "notes.txt")
    touch(os.path.join(root, "0001"), "a.jpg", "b.JPG")
    touch(os.path.join(root, "cam1", "0002"), "c.jpg")
    touch(os.path.join(root, ".hidden"), "d.jpg")

    def names(tree):
        return [os.path.relpath(p, root).replace(os.sep, "/") for p in list_tree(root, tree, (".jpg",))]

    assert names("flat") == ["top.jpg"]
    assert names("per_identity") == ["0001/a.jpg", "0001/b.JPG"]  # hidden folders are left out
    assert names("camera_identity") == ["cam1/0002/c.jpg"]
    assert names("recursive") == [".hidden/d.jpg", "0001/a.jpg", "0001/b.JPG", "cam1/0002/c.jpg", "top.jpg"]
    assert "top.jpg" not in names("subfolders") and "0001/a.jpg" in names("subfolders")
    with pytest.raises(ValueError, match="unknown image tree 'tree'"):
        list_tree(root, "tree", (".jpg",))


class _Declared(TrainOnlySet):
    """A set described only by its table entries: ``<root>/declared/{a,b}/<pid>/<camera>_<n>.png``."""

    dataset_name = "declared"
    folder_names = ("declared",)
    url = "nowhere"
    layout = "  {root}/declared/a/<pid>/<camera>_<n>.png"
    expected = "'<pid>/<camera>_<n>.png'"
    image_dirs = ("a", "b")
    optional_dirs = True
    tree = "per_identity"
    extensions = (".png",)
    camera = Field(sep="_", first=True)


def test_a_set_declared_by_its_table_entries(tmp_path, caplog):
    touch(tmp_path / "declared" / "a" / "0001", "c1_1.png", "c2_1.png", "skip.jpg")
    touch(tmp_path / "declared" / "a" / "0002", "c1_2.png")
    ds = _Declared(root=str(tmp_path))
    assert [(os.path.basename(p), pid, cam) for p, pid, cam in ds.train] == [
        ("c1_1.png", "declared_0001", "declared_c1"),
        ("c2_1.png", "declared_0001", "declared_c2"),
        ("c1_2.png", "declared_0002", "declared_c1"),
    ]
    assert ds.num_train_pids == 2
    touch(tmp_path / "declared" / "b" / "0003", "nocamera.png")  # the optional folder, one bad name
    with caplog.at_level(logging.WARNING, logger="fastreid.data.datasets.parsing"):
        assert len(_Declared(root=str(tmp_path)).train) == 3
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "skipped 1 of 4 entries" in warning and "nocamera.png (no '_' in the name)" in warning
    assert os.path.join(str(tmp_path), "declared", "a") + " + " in warning  # both image folders named


def test_required_image_folder_missing_is_named(tmp_path):
    class Required(_Declared):
        optional_dirs = False

    touch(tmp_path / "declared" / "a" / "0001", "c1_1.png")
    with pytest.raises(DatasetNotFoundError, match=r"not found: .*declared.b"):
        Required(root=str(tmp_path)).train  # noqa: B018
