"""What the face loaders index (upstream FastFace's ``face_data.py``): :class:`TestFaceDataset`,
the images of a verification set in pair order, and :class:`MXFaceDataset`, a training set in
MXNet's RecordIO format (``DATASETS.REC_PATH``) read without MXNet."""

from __future__ import annotations

import io
import logging
import os
import struct
from collections.abc import Sequence
from typing import Callable, Optional, Union

import numpy as np
import torch
from torch.utils.data import Dataset

from fastreid.data.data_utils import decode_image_bytes, read_image_tensor
from fastreid.data.datasets.bases import DatasetFormatError, DatasetNotFoundError
from fastreid.data.loading.seeds import SampleKey, sample_index, sample_seed

__all__ = ["MXFaceDataset", "RecordIOReader", "TestFaceDataset", "pack_record", "unpack_record"]

logger = logging.getLogger("fastreid.face_data")


class TestFaceDataset(Dataset):
    """``TestFaceDataset(img_items, labels, transform=None)``: image ``i`` of a verification set
    (a path, or the encoded bytes of a .bin) -> ``{"images", "targets": i, "img_paths"}``; pair
    ``k`` is images ``2k`` and ``2k + 1`` and ``labels[k]`` says whether they show one person."""

    accepts_sample_keys = True
    __test__ = False  # not a pytest test class, whatever its (upstream's) name

    def __init__(
        self,
        img_items: Sequence[Union[str, bytes]],
        labels: Sequence[bool],
        transform: Optional[Callable] = None,
        *,
        max_pixels: Optional[int] = None,
        name: str = "pairs",
    ) -> None:
        self.img_items = list(img_items)
        self.labels = np.asarray(labels, dtype=bool)
        if len(self.img_items) != 2 * len(self.labels):
            raise ValueError(
                f"{name}: {len(self.img_items)} images for {len(self.labels)} pairs; need two per pair"
            )
        self.transform = transform
        self.max_pixels = max_pixels
        self.name = name

    def __len__(self) -> int:
        return len(self.img_items)

    def __getitem__(self, key: Union[int, SampleKey]) -> dict:
        index = sample_index(key)
        item = self.img_items[index]
        if isinstance(item, (bytes, bytearray)):
            where = f"{self.name} image {index}"
            img = decode_image_bytes(bytes(item), where, max_pixels=self.max_pixels)
        else:
            where = str(item)
            img = read_image_tensor(item, max_pixels=self.max_pixels)
        if self.transform is not None:
            img = self.transform(img, torch.Generator().manual_seed(sample_seed(key)))
        return {"images": img, "targets": index, "img_paths": where}


# ---------------------------------------------------------------------- RecordIO

_MAGIC = 0xCED7230A
_HEADER = struct.Struct("<IfQQ")  # flag, label, id, id2: MXNet's IRHeader


def unpack_record(record: bytes) -> tuple[np.ndarray, bytes]:
    """``(label, payload)`` of one packed record (MXNet's ``recordio.unpack``): a header, then
    ``flag`` float32 labels when ``flag`` > 0 (else the header's one label), then the payload."""
    flag, label, _, _ = _HEADER.unpack_from(record, 0)
    payload = record[_HEADER.size :]
    if flag > 0:
        labels = np.frombuffer(payload[: flag * 4], dtype=np.float32).copy()
        return labels, payload[flag * 4 :]
    return np.asarray([label], dtype=np.float32), payload


def pack_record(label: Union[float, Sequence[float]], payload: bytes, record_id: int = 0) -> bytes:
    """The inverse of :func:`unpack_record` (MXNet's ``recordio.pack``)."""
    if isinstance(label, (int, float)):
        return _HEADER.pack(0, float(label), record_id, 0) + payload
    labels = np.asarray(label, dtype=np.float32)
    return _HEADER.pack(labels.size, 0.0, record_id, 0) + labels.tobytes() + payload


class RecordIOReader:
    """Records of an MXNet indexed RecordIO file (``.rec`` and its ``.idx``: ``key\\toffset``
    lines), read by key. A record split into parts (its payload held the magic number) is joined
    back, with the magic number between the parts, as MXNet's reader does."""

    def __init__(self, rec_path: str, idx_path: Optional[str] = None) -> None:
        self.rec_path = rec_path
        self.idx_path = idx_path or os.path.splitext(rec_path)[0] + ".idx"
        for path in (self.rec_path, self.idx_path):
            if not os.path.isfile(path):
                raise DatasetNotFoundError(
                    f"DATASETS.REC_PATH: not found: {path}; a RecordIO training set is a .rec file with its "
                    ".idx next to it (set DATASETS.REC_PATH, or '' to train on DATASETS.NAMES)"
                )
        self.offsets: dict[int, int] = {}
        with open(self.idx_path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                fields = line.split()
                if not fields:
                    continue
                try:
                    self.offsets[int(fields[0])] = int(fields[1])
                except (ValueError, IndexError):
                    raise DatasetFormatError(
                        f"{self.idx_path}:{number}: expected '<key>\\t<offset>', got {line.strip()!r}; "
                        "use the .idx written with the .rec"
                    ) from None
        self._file: Optional[io.BufferedReader] = None

    @property
    def keys(self) -> list[int]:
        return list(self.offsets)

    def __getstate__(self) -> dict:  # workers open their own file
        state = dict(self.__dict__)
        state["_file"] = None
        return state

    def read_idx(self, key: int) -> bytes:
        if self._file is None:
            self._file = open(self.rec_path, "rb")  # noqa: SIM115  (kept open for the reader's life)
        if key not in self.offsets:
            raise DatasetFormatError(f"{self.idx_path} has no record {key}")
        self._file.seek(self.offsets[key])
        parts = []
        while True:
            head = self._file.read(8)
            if len(head) < 8:
                raise DatasetFormatError(f"{self.rec_path}: record {key} is cut short; the file is truncated")
            magic, lrec = struct.unpack("<II", head)
            if magic != _MAGIC:
                raise DatasetFormatError(
                    f"{self.rec_path}: no record at offset {self.offsets[key]} (key {key}); the .idx does "
                    "not belong to this .rec"
                )
            cflag, length = lrec >> 29, lrec & ((1 << 29) - 1)
            parts.append(self._file.read(length))
            self._file.read((4 - length % 4) % 4)
            if cflag in (0, 3):
                break
        return struct.pack("<I", _MAGIC).join(parts)


class MXFaceDataset(Dataset):
    """A face training set in RecordIO (InsightFace's ``train.rec`` / ``train.idx``; upstream's
    class, which needs MXNet, read here with :class:`RecordIOReader`). Record 0's labels are
    ``(first image key + number of images, number of classes)`` as InsightFace writes them;
    each image record's label is its class. Items: ``{"images", "targets", "camids": 0}``."""

    accepts_sample_keys = True

    def __init__(
        self, path_imgrec: str, transforms: Optional[Callable] = None, *, max_pixels: Optional[int] = None
    ):
        super().__init__()
        self.transforms = transforms
        self.max_pixels = max_pixels
        logger.info(f"loading recordio {path_imgrec}...")
        self.imgrec = RecordIOReader(path_imgrec)
        label, _ = unpack_record(self.imgrec.read_idx(0))
        if label.size >= 2 and label[0] > 0:
            self.header0 = (int(label[0]), int(label[1]))
            self.imgidx = list(range(1, int(label[0])))
            self._num_classes = int(self.header0[1] - self.header0[0])
        else:
            self.imgidx = [k for k in self.imgrec.keys if k != 0]
            labels = {int(unpack_record(self.imgrec.read_idx(k))[0][0]) for k in self.imgidx}
            self._num_classes = max(labels) + 1 if labels else 0
        logger.info(f"Number of Samples: {len(self.imgidx)}, Number of Classes: {self._num_classes}")

    def __len__(self) -> int:
        return len(self.imgidx)

    def __getitem__(self, key: Union[int, SampleKey]) -> dict:
        index = sample_index(key)
        record_key = self.imgidx[index]
        label, payload = unpack_record(self.imgrec.read_idx(record_key))
        img = decode_image_bytes(
            payload, f"{self.imgrec.rec_path} record {record_key}", max_pixels=self.max_pixels
        )
        if self.transforms is not None:
            img = self.transforms(img, torch.Generator().manual_seed(sample_seed(key)))
        return {"images": img, "targets": torch.tensor(int(label[0]), dtype=torch.long), "camids": 0}

    @property
    def num_classes(self) -> int:
        return self._num_classes
