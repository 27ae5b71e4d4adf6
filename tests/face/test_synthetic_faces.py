"""The synthetic faces: upstream's layouts (MS1MV2 folders, pairs lists the family reads), test
identities apart from training ones, half of the pairs the same person, the same bytes for the
same arguments, the command line, and sizes it refuses."""

from __future__ import annotations

import hashlib
import os

import pytest

from fastreid.data.synthetic.common import SyntheticSpecError
from fastreid.data.synthetic.faces import TEST_SETS, FaceSpec, generate_faces, main
from fastreid.projects.face import MS1MV2, face_test_set


def _digest(folder: str) -> str:
    h = hashlib.sha256()
    for dirpath, _, files in sorted(os.walk(folder)):
        for name in sorted(files):
            if name.startswith("."):
                continue
            path = os.path.join(dirpath, name)
            h.update(os.path.relpath(path, folder).encode())
            with open(path, "rb") as f:
                h.update(f.read())
    return h.hexdigest()


def test_the_layout_reads_as_the_familys_data_sets(faces_root):
    train = MS1MV2(root=faces_root).train
    train_ids = {pid.split("_", 1)[1] for _, pid, _ in train}
    assert len(train_ids) == 12 and len(train) == 48
    for name, cls_name in zip(TEST_SETS, ("LFW", "CFP_FP", "AgeDB_30")):
        pairs = face_test_set(cls_name)(root=faces_root)
        assert pairs.source.endswith(os.path.join(name, "pairs.txt"))
        assert len(pairs.is_same) == 40 and pairs.is_same.sum() == 20
        test_ids = {os.path.basename(os.path.dirname(p)) for p in pairs.carray}
        assert not test_ids & train_ids  # verification on persons never trained on
        for k in range(len(pairs.is_same)):
            left, right = (os.path.basename(os.path.dirname(p)) for p in pairs.carray[2 * k : 2 * k + 2])
            assert (left == right) == bool(pairs.is_same[k])


def test_same_arguments_same_bytes(tmp_path, faces_root):
    spec = FaceSpec.small(seed=1)
    generate_faces(str(tmp_path), spec)
    for folder in ("MS_Celeb_1M", "faces_emore_val"):
        assert _digest(str(tmp_path / folder)) == _digest(os.path.join(faces_root, folder))
    other = tmp_path / "other"
    generate_faces(str(other), FaceSpec.small(seed=2))
    assert _digest(str(other / "MS_Celeb_1M")) != _digest(str(tmp_path / "MS_Celeb_1M"))


def test_the_command_line_writes_and_refuses_bad_sizes(tmp_path, capsys):
    assert main(["--root", str(tmp_path), "--small"]) == 0
    assert (tmp_path / "faces_emore_val" / "lfw" / "pairs.txt").is_file()
    assert main(["--root", str(tmp_path / "x"), "--pairs", "7"]) == 2
    assert "pairs_per_set must be even and at least 10" in capsys.readouterr().err
    with pytest.raises(SyntheticSpecError, match="at least 2 test identities"):
        FaceSpec(num_test_ids=1).validate()
