"""SAIVT-SoftBio (Bialkowski et al., 2012): ``cropped_images/<pid>/<a>-<b>-<camera>-<...>.jpeg``.

Upstream FastReID's ``fastreid/data/datasets/saivt.py``; read by the shared parser of
:mod:`~fastreid.data.datasets.train_only_base` (labels are upstream's strings,
``"<dataset_name>_<field>"``)."""

from __future__ import annotations

from . import DATASET_REGISTRY
from .train_only_base import Field, TrainOnlySet

__all__ = ["SAIVT"]


@DATASET_REGISTRY.register()
class SAIVT(TrainOnlySet):
    """SAIVT-SoftBio (Bialkowski et al., 2012): ``cropped_images/<pid>/<a>-<b>-<camera>-<...>.jpeg``."""

    dataset_name = "saivt"
    folder_names = ("SAIVT-SoftBio/cropped_images",)
    url = "https://researchdatafinder.qut.edu.au/display/n27416"
    expected = "'<pid>/<a>-<b>-<camera>-<...>.jpeg'"
    layout = """\
  {root}/SAIVT-SoftBio/
      cropped_images/
          <pid>/   <a>-<b>-<camera>-<...>.jpeg   (third '-' field: camera)"""

    tree = "per_identity"
    extensions = (".jpeg",)
    camera = Field(sep="-", index=2)
