"""The face verification test sets (upstream FastFace's ``datasets/test_dataset.py``): LFW,
CFP-FP, CFP-FF, AgeDB-30, CALFW, CPLFW and VGG2-FP as lists of image pairs.

Each set is read from ``{root}/faces_emore_val/``, in the first of these layouts that is there:

1. **pairs list** (this package's plain layout)::

       faces_emore_val/<name>/pairs.txt      one pair per line: <left image> <right image> <1|0>
       faces_emore_val/<name>/...            the images; paths in pairs.txt are relative to
                                             faces_emore_val/<name>/ (1: same person, 0: not)

   Blank lines and lines starting with ``#`` are skipped. Every image named must exist: a missing
   one is a one-line :class:`DatasetFormatError` naming pairs.txt, the line and the image, raised
   when the set is built (the face trainer builds its test sets before training starts).
2. **InsightFace's .bin** (``faces_emore_val/<name>.bin``, or ``faces_emore/<name>.bin`` as
   InsightFace publishes it): a pickle of ``(encoded images, is_same list)``, image ``2i`` and
   ``2i + 1`` forming pair ``i``. Read with an unpickler that accepts only those plain types.
3. **upstream's bcolz arrays** (``faces_emore_val/<name>/`` holding a bcolz ``carray`` and
   ``faces_emore_val/<name>_list.npy``): the bcolz package is unmaintained and does not install on
   current Python, so this layout is refused with a one-line error saying to use 1 or 2.

``<name>`` is upstream's: ``lfw``, ``cfp_fp``, ``cfp_ff``, ``agedb_30``, ``calfw``, ``cplfw``,
``vgg2_fp``. ``carray`` holds the image sources (paths, or encoded bytes from a .bin) and
``is_same`` one bool per pair, as upstream's attributes are named.
"""

from __future__ import annotations

import io
import logging
import os
import pickle
from typing import Any, Union

import numpy as np
from tabulate import tabulate
from termcolor import colored

from fastreid.data.datasets import DATASET_REGISTRY
from fastreid.data.datasets.bases import DatasetFormatError, DatasetNotFoundError, DatasetUsageError

from ...registration import register_once

__all__ = [
    "AgeDB_30",
    "CALFW",
    "CFP_FF",
    "CFP_FP",
    "CPLFW",
    "FACE_TEST_SETS",
    "FacePairs",
    "LFW",
    "VGG2_FP",
    "load_bin",
    "read_pairs_file",
]

logger = logging.getLogger("fastreid.face_dataset")

ImageSource = Union[str, bytes]

PAIRS_FILE = "pairs.txt"
SYNTHETIC_COMMAND = "python -m fastreid.data.synthetic.faces --root {root}"


def read_pairs_file(path: str) -> tuple[list[str], np.ndarray]:
    """``(images, is_same)`` of a pairs list: image paths (pair i is images 2i and 2i + 1, joined
    to the list's folder) and one bool per pair. Every image must exist."""
    folder = os.path.dirname(path)
    images: list[str] = []
    same: list[bool] = []
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            fields = line.split()
            if len(fields) != 3 or fields[2] not in ("0", "1"):
                raise DatasetFormatError(
                    f"{path}:{number}: expected '<left image> <right image> <1|0>', got {line!r}; "
                    "fix that line (1: same person, 0: different)"
                )
            for name in fields[:2]:
                image = os.path.join(folder, name)
                if not os.path.isfile(image):
                    raise DatasetFormatError(
                        f"{path}:{number} names {name}, which does not exist ({image}); add the image "
                        "or remove that pair from the list"
                    )
                images.append(image)
            same.append(fields[2] == "1")
    if not same:
        raise DatasetFormatError(f"{path} lists no pairs; add lines '<left image> <right image> <1|0>'")
    return images, np.asarray(same, dtype=bool)


class _PlainUnpickler(pickle.Unpickler):
    """Only the plain types of InsightFace's .bin files (lists, tuples, bytes, bools, numbers,
    and numpy bool scalars; ``_codecs.encode`` is how protocol 2 spells bytes); anything else in
    the file is refused instead of executed."""

    _ALLOWED = {
        ("_codecs", "encode"),
        ("numpy", "dtype"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a face pairs .bin file")


def load_bin(path: str) -> tuple[list[bytes], np.ndarray]:
    """``(encoded images, is_same)`` of an InsightFace ``.bin`` pairs file."""
    try:
        with open(path, "rb") as f:
            loaded = _PlainUnpickler(io.BytesIO(f.read()), encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as e:
        raise DatasetFormatError(
            f"{path} is not an InsightFace pairs .bin (a pickle of (images, is_same)): {e}; "
            "use the file as published, or write a pairs.txt layout instead"
        ) from None
    if not (isinstance(loaded, (tuple, list)) and len(loaded) == 2):
        raise DatasetFormatError(f"{path} does not hold (images, is_same); use the file as published")
    bins, issame = loaded
    images = [bytes(b) for b in bins]
    same = np.asarray([bool(s) for s in issame], dtype=bool)
    if len(images) != 2 * len(same):
        raise DatasetFormatError(
            f"{path} holds {len(images)} images for {len(same)} pairs; a pairs .bin needs two images per pair"
        )
    return images, same


class FacePairs:
    """A verification test set: ``carray`` (2N image sources, pair i = items 2i and 2i + 1) and
    ``is_same`` (N bools). Subclasses set ``dataset_name`` (the file and folder name)."""

    #: What the re-ID loaders check: a pairs set is not a re-ID set.
    task = "face"
    #: How to use it, for the error a re-ID config naming it gets.
    usage_hint = "it is a face verification pairs set for DATASETS.TESTS of a FaceBaseline config (e.g. configs/Face/r50_ir.yml)"
    dataset_dir = "faces_emore_val"
    dataset_name = "lfw"

    def __init__(self, root: str = "datasets", **kwargs: Any) -> None:
        self.root = root
        self.dataset_dir = os.path.join(self.root, type(self).dataset_dir)
        self.source = ""
        self.carray, self.is_same = self._load()

    # ------------------------------------------------------------------ layouts

    def _candidates(self) -> dict[str, str]:
        name = self.dataset_name
        return {
            "pairs": os.path.join(self.dataset_dir, name, PAIRS_FILE),
            "bin": os.path.join(self.dataset_dir, f"{name}.bin"),
            "bin_emore": os.path.join(self.root, "faces_emore", f"{name}.bin"),
            "bcolz": os.path.join(self.dataset_dir, name),
        }

    def _load(self) -> tuple[list, np.ndarray]:
        paths = self._candidates()
        if os.path.isfile(paths["pairs"]):
            self.source = paths["pairs"]
            images, same = read_pairs_file(paths["pairs"])
            return list(images), same
        for key in ("bin", "bin_emore"):
            if os.path.isfile(paths[key]):
                self.source = paths[key]
                images_b, same = load_bin(paths[key])
                return list(images_b), same
        folder = paths["bcolz"]
        if os.path.isdir(folder) and os.path.exists(os.path.join(folder, "meta")):
            raise DatasetFormatError(
                f"{type(self).__name__}: {folder} is a bcolz array (upstream's layout), which needs the "
                "unmaintained bcolz package; use InsightFace's "
                f"{self.dataset_name}.bin in {self.dataset_dir} or a {PAIRS_FILE} layout (docs/face.md)"
            )
        raise DatasetNotFoundError(
            f"{type(self).__name__}: not found: {paths['pairs']} or {paths['bin']}. Data sets are looked for "
            f"under '{self.root}' (set FASTREID_DATASETS to change it). Expected layout: "
            f"{paths['pairs']} ('<left> <right> <1|0>' per line, images relative to its folder) or "
            f"InsightFace's {paths['bin']}. No download? Write a synthetic copy: "
            + SYNTHETIC_COMMAND.format(root=self.root)
        )

    # ------------------------------------------------------------------ not a re-ID set

    def _not_reid(self) -> DatasetUsageError:
        return DatasetUsageError(
            f"{type(self).__name__} is a face verification set (image pairs, no query/gallery): train it "
            "with MODEL.META_ARCHITECTURE FaceBaseline (e.g. configs/Face/face_base.yml)"
        )

    @property
    def train(self) -> list:
        raise self._not_reid()

    @property
    def query(self) -> list:
        raise self._not_reid()

    @property
    def gallery(self) -> list:
        raise self._not_reid()

    def __len__(self) -> int:
        return len(self.is_same)

    def show_test(self) -> None:
        n = len(self.is_same)
        positives = int(np.sum(self.is_same))
        rows = [["pairs", n], ["same", positives], ["different", n - positives], ["images", len(self.carray)]]
        table = tabulate(rows, tablefmt="pipe", headers=["subset", "#"], numalign="left")
        logger.info(f"=> Loaded {type(self).__name__} from {self.source}:\n" + colored(table, "cyan"))


class CPLFW(FacePairs):
    dataset_name = "cplfw"


class VGG2_FP(FacePairs):  # noqa: N801  (upstream's registry name)
    dataset_name = "vgg2_fp"


class AgeDB_30(FacePairs):  # noqa: N801  (upstream's registry name)
    dataset_name = "agedb_30"


class CALFW(FacePairs):
    dataset_name = "calfw"


class CFP_FF(FacePairs):  # noqa: N801  (upstream's registry name)
    dataset_name = "cfp_ff"


class CFP_FP(FacePairs):  # noqa: N801  (upstream's registry name)
    dataset_name = "cfp_fp"


class LFW(FacePairs):
    dataset_name = "lfw"


#: The verification test sets of this family, by their config names.
FACE_TEST_SETS = {cls.__name__: cls for cls in (CPLFW, VGG2_FP, AgeDB_30, CALFW, CFP_FF, CFP_FP, LFW)}

for _cls in FACE_TEST_SETS.values():
    register_once(DATASET_REGISTRY, _cls)
