"""Training-only sets with one folder per identity: the pid is the folder's name (PRID: a field
of it), the camera a field of the file name, a folder above, or one camera for all.

Labels are upstream's strings (``"<dataset_name>_<field>"``); see
:mod:`~fastreid.data.datasets.train_only_sets` for the conventions and
:mod:`~fastreid.data.datasets.train_only_base` for the shared parser.
"""

from __future__ import annotations

from . import DATASET_REGISTRY
from .train_only_base import Field, TrainOnlySet

__all__ = [
    "iLIDS",
    "LPW",
    "PeS3D",
    "PRID",
    "SAIVT",
    "SYSU_mm",
    "Thermalworld",
    "WildTrackCrop",
]


@DATASET_REGISTRY.register()
class iLIDS(TrainOnlySet):  # noqa: N801  (upstream's registry name)
    """i-LIDS person images, one folder per identity, ``<camera>_<...>.png``."""

    dataset_name = "ilids"
    folder_names = ("iLIDS",)
    url = "http://www.eecs.qmul.ac.uk/~jason/data/i-LIDS_Pedestrian.tgz (arranged one folder per person)"
    expected = "'<pid>/<camera>_<...>.png'"
    layout = """\
  {root}/iLIDS/
      <pid>/   cam1_0001.png ...   (folder name: pid; file name up to the first '_': camera)"""

    tree = "per_identity"
    extensions = (".png",)
    camera = Field(sep="_", first=True)


@DATASET_REGISTRY.register()
class LPW(TrainOnlySet):
    """Labeled Pedestrian in the Wild (Song et al., AAAI 2018): ``scen<k>/<camera>/<pid>/*.jpg``;
    identities are per scene (``lpw_scen1-<pid>``)."""

    dataset_name = "lpw"
    folder_names = ("pep_256x128/data_slim",)
    url = "the authors of LPW (Song et al., AAAI 2018, region-based quality estimation)"
    expected = "'scen<k>/<camera>/<pid>/<image>.jpg'"
    layout = """\
  {root}/pep_256x128/data_slim/
      scen1/  scen2/  scen3/
          view1/ ...          (camera)
              1/ 2/ ...       (pid within the scene)
                  *.jpg"""

    image_dirs = ("scen1", "scen2", "scen3")
    optional_dirs = True
    tree = "camera_identity"
    camera = Field(level=2)

    def item(self, path: str) -> tuple:
        scene, pid = Field(level=3)(path), Field(level=1)(path)
        return (path, self.label(f"{scene}-{pid}"), self.label(self._read(self.camera, path)))


@DATASET_REGISTRY.register()
class PeS3D(TrainOnlySet):
    """3DPeS (Baltieri et al., 2011), one folder per identity of ``.bmp`` images; one camera."""

    dataset_name = "pes3d"
    folder_names = ("3DPeS",)
    url = "http://www.openvisor.org/3dpes.asp"
    expected = "'<pid>/<image>.bmp'"
    layout = """\
  {root}/3DPeS/
      <pid>/   *.bmp"""

    tree = "per_identity"
    extensions = (".bmp",)


@DATASET_REGISTRY.register()
class PRID(TrainOnlySet):
    """PRID 2011 (Hirzer et al., SCIA 2011) as upstream reads it: ``slim_train/<x>_<pid>/<camera>_<...>.png``."""

    dataset_name = "prid"
    folder_names = (
        "prid_2011/slim_train",
        "prid2011/prid_2011/slim_train",
    )  # upstream's, under torchreid's folder
    url = "https://www.tugraz.at/institute/icg/research/team-bischof/lrs/downloads/PRID11/"
    expected = "'<name>_<pid>/<camera>_<...>.png'"
    layout = """\
  {root}/prid_2011/
      slim_train/
          person_0001/   a_0001.png ...   (folder: <x>_<pid>; file: <camera>_<...>)"""

    tree = "subfolders"
    extensions = (".png",)
    pid = Field(level=1, sep="_", index=1)
    camera = Field(sep="_", index=0)


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


@DATASET_REGISTRY.register()
class SYSU_mm(TrainOnlySet):  # noqa: N801  (upstream's registry name)
    """SYSU-MM01 (Wu et al., ICCV 2017), the RGB cameras 1, 2, 4 and 5: ``cam<k>/<pid>/*.jpg``."""

    dataset_name = "sysumm01"
    folder_names = ("SYSU-MM01",)
    url = "https://github.com/wuancong/SYSU-MM01"
    expected = "'cam<k>/<pid>/<image>.jpg'"
    layout = """\
  {root}/SYSU-MM01/
      cam1/  cam2/  cam4/  cam5/     (the RGB cameras; cam3/ and cam6/ are infrared, unused)
          0001/   0001.jpg ..."""

    image_dirs = ("cam1", "cam2", "cam4", "cam5")
    optional_dirs = True
    tree = "per_identity"
    camera = Field(level=2)


@DATASET_REGISTRY.register()
class Thermalworld(TrainOnlySet):
    """ThermalWorld, its RGB images (Kniaz et al., ECCVW 2018): one folder per identity; one camera."""

    dataset_name = "thermalworld"
    folder_names = ("thermalworld_rgb",)
    url = "the authors of ThermalGAN (Kniaz et al., ECCV Workshops 2018), who released ThermalWorld"
    expected = "'<pid>/<image>.jpg'"
    layout = """\
  {root}/thermalworld_rgb/
      <pid>/   *.jpg"""

    tree = "per_identity"


@DATASET_REGISTRY.register()
class WildTrackCrop(TrainOnlySet):
    """Persons cropped from WILDTRACK (Chavdarova et al., CVPR 2018): ``crop/<pid>/<camera>_<...>.png``."""

    dataset_name = "wildtrack"
    folder_names = ("Wildtrack_crop_dataset/crop",)
    url = "https://www.epfl.ch/labs/cvlab/data/data-wildtrack/ (crop the annotated boxes into crop/<pid>/)"
    expected = "'<pid>/<camera>_<...>.png'"
    layout = """\
  {root}/Wildtrack_crop_dataset/
      crop/
          <pid>/   C1_00000000.png ...   (camera_frame)"""

    tree = "per_identity"
    extensions = (".png",)
    camera = Field(sep="_", first=True)
