"""The partial test sets read upstream's layouts (here the synthetic ones), and every bad input is
one line naming the folder or file and the fix."""

from __future__ import annotations

import hashlib
import os

import pytest

from fastreid.data.datasets import DATASET_REGISTRY
from fastreid.data.datasets.bases import DatasetFormatError, DatasetNotFoundError, DatasetUsageError
from fastreid.data.synthetic.partial import SETS, PartialSpec, generate_partial, main
from fastreid.projects.partial import OccludedREID, PartialiLIDS, PartialREID
from fastreid.projects.partial.partial_dataset import process_test


@pytest.mark.parametrize(
    ("cls", "ids", "per_id"), [(PartialREID, 6, 2), (PartialiLIDS, 8, 1), (OccludedREID, 6, 2)]
)
def test_the_readers_read_the_synthetic_sets(partial_root, cls, ids, per_id):
    assert DATASET_REGISTRY.get(cls.__name__) is cls
    data = cls(root=partial_root)
    assert len(data.query) == len(data.gallery) == ids * per_id
    assert {p for _, p, _ in data.query} == {p for _, p, _ in data.gallery} == set(range(1, ids + 1))
    # queries numbered 1..k, galleries after them: none is left out of a query's ranking
    assert max(c for _, _, c in data.query) < min(c for _, _, c in data.gallery)
    assert [i[0] for i in data.query] == sorted(i[0] for i in data.query)
    path, pid, camid = data.query[0]
    assert os.path.basename(path) == f"{pid:03d}_{camid:0{SETS[cls.__name__][4]}d}.jpg"


def test_a_partial_set_is_a_test_set_only(partial_root):
    data = PartialREID(root=partial_root)
    with pytest.raises(DatasetUsageError, match=r"test-only .* DATASETS.TESTS"):
        _ = data.train


def test_the_name_is_read_from_the_file_not_the_folder(tmp_path):
    """Upstream searched the whole path: a folder such as disk1_2 gave every image pid 1, camera 2."""
    for d in ("disk1_2/q", "disk1_2/g"):
        os.makedirs(tmp_path / d)
    (tmp_path / "disk1_2/q/017_3.jpg").write_bytes(b"")
    (tmp_path / "disk1_2/g/017_8.jpg").write_bytes(b"")
    query, gallery = process_test(str(tmp_path / "disk1_2/q"), str(tmp_path / "disk1_2/g"))
    assert [q[1:] for q in query] == [(17, 3)] and [g[1:] for g in gallery] == [(17, 8)]


def test_a_missing_set_names_the_folder_the_layout_and_the_synthetic_command(tmp_path):
    with pytest.raises(DatasetNotFoundError) as e:
        OccludedREID(root=str(tmp_path))
    message = str(e.value)
    assert os.path.join(str(tmp_path), "OccludedREID", "query") in message
    assert "python -m fastreid.data.synthetic.partial --root" in message


def test_an_empty_folder_or_a_bad_name_is_one_line(tmp_path):
    for d in ("PartialiLIDS/query", "PartialiLIDS/gallery"):
        os.makedirs(tmp_path / d)
    with pytest.raises(DatasetFormatError, match=r"no \.jpg image in .*query"):
        _ = PartialiLIDS(root=str(tmp_path)).query
    (tmp_path / "PartialiLIDS/query/person7.jpg").write_bytes(b"")
    with pytest.raises(DatasetFormatError) as e:
        _ = PartialiLIDS(root=str(tmp_path)).query
    assert "person7.jpg" in str(e.value) and "<pid>_<number>" in str(e.value) and "\n" not in str(e.value)


def _digest(folder: str) -> str:
    h = hashlib.sha256()
    for dirpath, _, files in sorted(os.walk(folder)):
        for name in sorted(files):
            if name.endswith(".jpg"):
                with open(os.path.join(dirpath, name), "rb") as f:
                    h.update(name.encode() + f.read())
    return h.hexdigest()


def test_the_generator_is_deterministic_and_keeps_what_it_did_not_write(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    generate_partial(str(a), PartialSpec.small(seed=3), sets=("PartialiLIDS",))
    assert main(["--root", str(b), "--small", "--seed", "3"]) == 0
    assert _digest(a / "PartialiLIDS") == _digest(b / "PartialiLIDS")
    assert set(os.listdir(b)) == {"OccludedREID", "PartialiLIDS", "Partial_REID"}
    (b / "OccludedREID" / "mine.txt").write_text("not generated")
    assert main(["--root", str(b), "--small"]) != 0  # refuses: the folder holds a file it did not write
    assert (b / "OccludedREID" / "mine.txt").exists()
