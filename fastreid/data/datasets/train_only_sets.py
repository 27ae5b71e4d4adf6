"""The person re-ID sets upstream FastReID uses for training only (they add identities to
``DATASETS.NAMES``; none has a query/gallery split).

Identities and cameras are the strings upstream builds (``"<dataset_name>_<field>"``, the field
taken verbatim from the folder or file name), so a combined training run relabels exactly as
upstream's does. Folders and names follow upstream's parsers; file order is sorted (upstream's
``glob`` order depends on the file system).

The sets are declared in :mod:`~fastreid.data.datasets.train_only_name_sets` (identity in the
file name or a list line) and :mod:`~fastreid.data.datasets.train_only_folder_sets` (one folder
per identity), read by the parser of :mod:`~fastreid.data.datasets.train_only_base`; this module
keeps the import path.
"""

from __future__ import annotations

from .train_only_folder_sets import LPW, PRID, SAIVT, PeS3D, SYSU_mm, Thermalworld, WildTrackCrop, iLIDS
from .train_only_name_sets import (
    GRID,
    PKU,
    PRAI,
    AirportALERT,
    CAVIARa,
    SenseReID,
    Shinpuhkan,
    VIPeR,
    cuhkSYSU,
)

__all__ = [
    "AirportALERT",
    "CAVIARa",
    "cuhkSYSU",
    "GRID",
    "iLIDS",
    "LPW",
    "PeS3D",
    "PKU",
    "PRAI",
    "PRID",
    "SAIVT",
    "SenseReID",
    "Shinpuhkan",
    "SYSU_mm",
    "Thermalworld",
    "VIPeR",
    "WildTrackCrop",
]
