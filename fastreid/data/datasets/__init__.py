"""Re-ID datasets: ``DATASET_REGISTRY`` maps config names (``DATASETS.NAMES``) to classes.

Every name upstream FastReID registers is here, with upstream's identity and camera
conventions; ``datasets/README.md`` shows each folder layout.
"""

from fastreid.utils.errors import UserError
from fastreid.utils.registry import Registry


class UnknownDatasetError(UserError, KeyError):
    """A data set name that is not registered; the message lists the registered ones."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class _DatasetRegistry(Registry):
    def get(self, name: str):
        obj = self._obj_map.get(name)
        if obj is None:
            close = [n for n in self._obj_map if n.lower() == str(name).lower()]
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise UnknownDatasetError(
                f"unknown data set {name!r} in DATASETS.NAMES / DATASETS.TESTS.{hint} Registered: "
                f"{', '.join(sorted(self._obj_map, key=str.lower))}. For your own data use CustomReID or "
                "fastreid.data.datasets.register_folder_dataset (see datasets/README.md)."
            )
        return obj


DATASET_REGISTRY: _DatasetRegistry = _DatasetRegistry("DATASET")
DATASET_REGISTRY.__doc__ = (
    """Registry of re-ID datasets: ``cls(root=..., **kwargs)`` with .train/.query/.gallery."""
)

from .AirportALERT import AirportALERT  # noqa: E402
from .bases import (  # noqa: E402
    Dataset,
    DatasetFormatError,
    DatasetNotFoundError,
    DatasetUsageError,
    ImageDataset,
    TrainOnlyDataset,
)
from .caviara import CAVIARa  # noqa: E402
from .cuhk03 import CUHK03  # noqa: E402
from .cuhk_sysu import cuhkSYSU  # noqa: E402
from .dukemtmcreid import DukeMTMC  # noqa: E402
from .generic import CustomReID, register_folder_dataset  # noqa: E402
from .grid import GRID  # noqa: E402
from .iLIDS import iLIDS  # noqa: E402
from .lpw import LPW  # noqa: E402
from .market1501 import Market1501  # noqa: E402
from .msmt17 import MSMT17  # noqa: E402
from .pes3d import PeS3D  # noqa: E402
from .pku import PKU  # noqa: E402
from .prai import PRAI  # noqa: E402
from .prid import PRID  # noqa: E402
from .saivt import SAIVT  # noqa: E402
from .sensereid import SenseReID  # noqa: E402
from .shinpuhkan import Shinpuhkan  # noqa: E402
from .sysu_mm import SYSU_mm  # noqa: E402
from .thermalworld import Thermalworld  # noqa: E402
from .vehicleid import LargeVehicleID, MediumVehicleID, SmallVehicleID, VehicleID  # noqa: E402
from .veri import VeRi  # noqa: E402
from .veriwild import LargeVeRiWild, MediumVeRiWild, SmallVeRiWild, VeRiWild  # noqa: E402
from .viper import VIPeR  # noqa: E402
from .wildtracker import WildTrackCrop  # noqa: E402

#: The 30 names upstream FastReID registers (its ``fastreid/data/datasets/__init__.py``).
UPSTREAM_NAMES = (
    "CUHK03",
    "DukeMTMC",
    "Market1501",
    "MSMT17",
    "AirportALERT",
    "iLIDS",
    "PKU",
    "PRAI",
    "PRID",
    "GRID",
    "SAIVT",
    "SenseReID",
    "SYSU_mm",
    "Thermalworld",
    "PeS3D",
    "CAVIARa",
    "VIPeR",
    "LPW",
    "Shinpuhkan",
    "WildTrackCrop",
    "cuhkSYSU",
    "VeRi",
    "VehicleID",
    "SmallVehicleID",
    "MediumVehicleID",
    "LargeVehicleID",
    "VeRiWild",
    "SmallVeRiWild",
    "MediumVeRiWild",
    "LargeVeRiWild",
)

__all__ = [
    "DATASET_REGISTRY",
    "UPSTREAM_NAMES",
    "UnknownDatasetError",
    "Dataset",
    "ImageDataset",
    "TrainOnlyDataset",
    "DatasetNotFoundError",
    "DatasetFormatError",
    "DatasetUsageError",
    "Market1501",
    "DukeMTMC",
    "MSMT17",
    "CUHK03",
    "CustomReID",
    "register_folder_dataset",
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
    "VeRi",
    "VehicleID",
    "SmallVehicleID",
    "MediumVehicleID",
    "LargeVehicleID",
    "VeRiWild",
    "SmallVeRiWild",
    "MediumVeRiWild",
    "LargeVeRiWild",
]
