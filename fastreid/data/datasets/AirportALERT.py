r"""Airport ALERT (Gou et al., 2018): images listed in ``filepath.txt`` as ``<camera>\<pid>\<file>``;

Upstream FastReID's ``fastreid/data/datasets/AirportALERT.py``; read by the shared parser of
:mod:`~fastreid.data.datasets.train_only_base` (labels are upstream's strings,
``"<dataset_name>_<field>"``)."""

from __future__ import annotations

import os
from typing import Optional

from . import DATASET_REGISTRY
from .bases import DatasetNotFoundError
from .parsing import parse_entries, read_lines
from .train_only_base import TrainOnlySet, field

__all__ = ["AirportALERT"]


@DATASET_REGISTRY.register()
class AirportALERT(TrainOnlySet):
    """Airport ALERT (Gou et al., 2018): images listed in ``filepath.txt`` as ``<camera>\\<pid>\\<file>``;
    as upstream, only pids >= 11001 are used."""

    dataset_name = "airport"
    folder_names = ("AirportALERT",)
    url = (
        "http://www.northeastern.edu/alert/transitioning-technology/alert-datasets/"
        "alert-airport-re-identification-dataset/"
    )
    expected = r"lines '<camera>\<pid>\<image file>' (pid an integer)"
    layout = """\
  {root}/AirportALERT/
      filepath.txt          one image a line: <camera>\\<pid>\\<image file> (Windows separators)
      <camera>/<pid>/<image file> ..."""

    def parse(self, folder: str) -> list:
        list_file = os.path.join(folder, "filepath.txt")
        if not os.path.isfile(list_file):
            raise DatasetNotFoundError(self._missing_message(list_file, self.root, self.layout))

        def parse(line: str) -> Optional[tuple]:
            parts = line.split("\\")
            camera, pid = field(line, "\\", 0), field(line, "\\", 1)
            if int(pid) < 11001:
                return None  # upstream's filter
            return (os.path.join(folder, *parts), self.label(pid), self.label(camera))

        return parse_entries(type(self).__name__, list_file, read_lines(list_file), parse, self.expected)
