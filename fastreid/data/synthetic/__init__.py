"""Synthetic re-ID data sets, drawn procedurally, for demos and tests that need no download.

- :mod:`.persons`: a Market-1501 (``python -m fastreid.data.synthetic --root datasets``), and a
  second visual domain laid out as DukeMTMC-reID (``--domain B``), for domain adaptation;
- :mod:`.vehicles`: a VeRi-776, or VehicleID / VERI-Wild layouts
  (``python -m fastreid.data.synthetic.vehicles --root datasets``);
- :mod:`.person_images` and :mod:`.vehicle_images` draw the pictures, :mod:`.common` holds what both
  share (random streams, colours, JPEG encoding, the spec checks), and :mod:`.tree` writes a
  generated folder so that only such a folder is ever replaced.

The readers are the real data set classes (:class:`~fastreid.data.datasets.Market1501`,
:class:`~fastreid.data.datasets.VeRi`, ...): the files have the real sets' names and layouts.
"""

from .persons import SyntheticSpec, SyntheticSpecError, generate_dukemtmc, generate_market1501
from .tree import GeneratedTreeError
from .vehicles import VehicleSpec, generate_vehicles, generate_veri

__all__ = [
    "GeneratedTreeError",
    "SyntheticSpec",
    "SyntheticSpecError",
    "VehicleSpec",
    "generate_dukemtmc",
    "generate_market1501",
    "generate_vehicles",
    "generate_veri",
]
