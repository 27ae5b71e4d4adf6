"""The face data sets, registered in ``DATASET_REGISTRY`` under upstream's names: the training
set ``MS1MV2`` and the verification pairs ``LFW``, ``CFP_FP``, ``CFP_FF``, ``AgeDB_30``,
``CALFW``, ``CPLFW`` and ``VGG2_FP``."""

from .ms1mv2 import MS1MV2
from .test_dataset import (
    CALFW,
    CFP_FF,
    CFP_FP,
    CPLFW,
    FACE_TEST_SETS,
    LFW,
    VGG2_FP,
    AgeDB_30,
    FacePairs,
    load_bin,
    read_pairs_file,
)

__all__ = [
    "CALFW",
    "CFP_FF",
    "CFP_FP",
    "CPLFW",
    "FACE_TEST_SETS",
    "LFW",
    "MS1MV2",
    "VGG2_FP",
    "AgeDB_30",
    "FacePairs",
    "load_bin",
    "read_pairs_file",
]
