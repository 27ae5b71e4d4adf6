"""The face data: MS1MV2's folders, the pairs sets in their three layouts (pairs.txt, InsightFace's
.bin, upstream's bcolz: refused with a clear error) and every bad input as one line naming the
file and the fix; the RecordIO training set read without MXNet."""

from __future__ import annotations

import io
import os
import pickle
import shutil
import struct

import numpy as np
import pytest
import torch
from PIL import Image

from fastreid.data.datasets import DATASET_REGISTRY, UnknownDatasetError
from fastreid.data.datasets.bases import DatasetFormatError, DatasetNotFoundError, DatasetUsageError
from fastreid.projects.face import CFP_FP, LFW, MS1MV2, MXFaceDataset, TestFaceDataset, face_test_set
from fastreid.projects.face.datasets import load_bin, read_pairs_file
from fastreid.projects.face.face_data import RecordIOReader, pack_record, unpack_record


def _jpeg(colour, size=(20, 20)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, format="JPEG")
    return buf.getvalue()


def test_upstreams_names_are_registered():
    for name in ("MS1MV2", "LFW", "CFP_FP", "CFP_FF", "AgeDB_30", "CALFW", "CPLFW", "VGG2_FP"):
        assert name in DATASET_REGISTRY
    assert face_test_set("CFP_FP") is CFP_FP


def test_ms1mv2_reads_a_folder_per_identity(faces_root):
    data = MS1MV2(root=faces_root)
    assert len(data.train) == 12 * 4
    pids = sorted({pid for _, pid, _ in data.train})
    assert len(pids) == 12 and all(p.startswith("ms1mv2_") for p in pids)
    with pytest.raises(DatasetUsageError, match="training-only"):
        _ = data.query


def test_the_synthetic_pairs_read_as_upstreams_attributes(faces_root):
    lfw = LFW(root=faces_root)
    assert len(lfw.carray) == 2 * len(lfw.is_same) == 80
    assert lfw.is_same.dtype == bool and lfw.is_same.sum() == 20
    assert all(os.path.isfile(p) for p in lfw.carray)
    with pytest.raises(DatasetUsageError, match="face verification set"):
        _ = lfw.query


def _pairs_tree(tmp_path, lines):
    folder = tmp_path / "faces_emore_val" / "lfw"
    os.makedirs(folder / "a")
    for name in ("a/1.jpg", "a/2.jpg", "b.jpg"):
        (folder / name).write_bytes(_jpeg((10, 20, 30)))
    (folder / "pairs.txt").write_text("\n".join(lines) + "\n")
    return folder / "pairs.txt"


def test_a_pairs_list_naming_a_missing_image_is_one_line_naming_it(tmp_path):
    pairs = _pairs_tree(tmp_path, ["# left right same", "a/1.jpg a/2.jpg 1", "", "a/1.jpg missing/3.jpg 0"])
    with pytest.raises(DatasetFormatError) as e:
        LFW(root=str(tmp_path))
    message = str(e.value)
    assert "\n" not in message
    assert f"{pairs}:4 names missing/3.jpg" in message and "add the image or remove that pair" in message


def test_a_malformed_pairs_line_is_named(tmp_path):
    pairs = _pairs_tree(tmp_path, ["a/1.jpg a/2.jpg yes"])
    with pytest.raises(DatasetFormatError, match=rf"{pairs}:1: expected '<left image> <right image> <1\|0>'"):
        read_pairs_file(str(pairs))
    pairs.write_text("# nothing\n")
    with pytest.raises(DatasetFormatError, match="lists no pairs"):
        read_pairs_file(str(pairs))


def test_insightfaces_bin_is_read_and_code_in_it_refused(tmp_path):
    folder = tmp_path / "faces_emore"
    os.makedirs(folder)
    images = [_jpeg((i * 40, 0, 0)) for i in range(4)]
    with open(folder / "lfw.bin", "wb") as f:
        pickle.dump((images, [True, np.bool_(False)]), f, protocol=2)
    lfw = LFW(root=str(tmp_path))
    assert lfw.carray == images and lfw.is_same.tolist() == [True, False]
    loader = TestFaceDataset(lfw.carray, lfw.is_same)
    item = loader[1]
    assert (
        item["images"].shape == (3, 20, 20) and item["targets"] == 1 and item["images"][0].float().mean() > 20
    )

    class Evil:
        def __reduce__(self):
            return (os.system, ("echo never",))

    with open(folder / "lfw.bin", "wb") as f:
        pickle.dump((images, Evil()), f)
    with pytest.raises(DatasetFormatError, match="posix.system is not allowed|os.system is not allowed"):
        load_bin(str(folder / "lfw.bin"))
    with open(folder / "lfw.bin", "wb") as f:
        pickle.dump((images, [True]), f)
    with pytest.raises(DatasetFormatError, match="holds 4 images for 1 pairs"):
        load_bin(str(folder / "lfw.bin"))


def test_upstreams_bcolz_layout_is_refused_with_the_way_out(tmp_path):
    folder = tmp_path / "faces_emore_val" / "cfp_fp"
    os.makedirs(folder / "data")
    (folder / "meta").write_text("{}")
    with pytest.raises(DatasetFormatError, match="bcolz array .* use InsightFace's cfp_fp.bin"):
        CFP_FP(root=str(tmp_path))


def test_a_missing_set_names_the_layouts_and_the_synthetic_command(tmp_path):
    with pytest.raises(DatasetNotFoundError) as e:
        LFW(root=str(tmp_path))
    message = str(e.value)
    assert "pairs.txt" in message and "lfw.bin" in message
    assert "python -m fastreid.data.synthetic.faces --root" in message and "\n" not in message


def test_an_unknown_test_set_names_the_closest():
    with pytest.raises(UnknownDatasetError, match="Did you mean 'AgeDB_30'"):
        face_test_set("agedb_30")
    with pytest.raises(UnknownDatasetError, match="not a verification pairs set"):
        face_test_set("Market1501")


def _write_rec(tmp_path, records):
    rec, idx = tmp_path / "train.rec", tmp_path / "train.idx"
    with open(rec, "wb") as f, open(idx, "w") as g:
        for key, record in records:
            g.write(f"{key}\t{f.tell()}\n")
            f.write(struct.pack("<II", 0xCED7230A, len(record)))
            f.write(record + b"\0" * ((4 - len(record) % 4) % 4))
    return rec


def test_a_recordio_training_set_reads_without_mxnet(tmp_path):
    images = [
        (_jpeg((200, 10, 10), (16, 16)), 0),
        (_jpeg((10, 200, 10), (16, 16)), 1),
        (_jpeg((10, 10, 200), (16, 16)), 1),
    ]
    records = [(0, pack_record([4.0, 6.0], b""))]  # InsightFace's header: images 1..3, classes 4..5 -> 2
    records += [(k, pack_record(float(label), data, k)) for k, (data, label) in enumerate(images, 1)]
    rec = _write_rec(tmp_path, records)
    data = MXFaceDataset(str(rec), None)
    assert len(data) == 3 and data.num_classes == 2
    item = data[1]
    assert item["targets"] == torch.tensor(1) and item["images"].shape == (3, 16, 16)
    assert item["images"][1].float().mean() > 150  # the green one
    label, payload = unpack_record(pack_record([1.0, 2.0, 3.0], b"xyz"))
    assert label.tolist() == [1.0, 2.0, 3.0] and payload == b"xyz"


def test_a_record_split_at_the_magic_number_is_joined(tmp_path):
    magic = struct.pack("<I", 0xCED7230A)
    payload = pack_record(3.0, b"ab" + magic + b"cd")
    first, second = payload.split(magic)
    rec, idx = tmp_path / "x.rec", tmp_path / "x.idx"
    with open(rec, "wb") as f:
        for cflag, part in ((1, first), (3, second)):
            f.write(struct.pack("<II", 0xCED7230A, (cflag << 29) | len(part)))
            f.write(part + b"\0" * ((4 - len(part) % 4) % 4))
    idx.write_text("7\t0\n")
    assert RecordIOReader(str(rec)).read_idx(7) == payload


def test_a_missing_rec_file_names_the_key(tmp_path):
    with pytest.raises(DatasetNotFoundError, match="DATASETS.REC_PATH: not found: .*train.rec"):
        MXFaceDataset(str(tmp_path / "train.rec"), None)
    shutil.rmtree(tmp_path)


def test_a_pairs_set_in_a_reid_config_says_how_to_use_it(faces_root, monkeypatch):
    from fastreid.data.build import _reid_dataset  # the re-ID loaders' check, private to them

    monkeypatch.setenv("FASTREID_DATASETS", faces_root)
    with pytest.raises(
        DatasetUsageError, match="LFW is a data set for face recognition, not re-ID: .*FaceBaseline"
    ):
        _reid_dataset("LFW")
