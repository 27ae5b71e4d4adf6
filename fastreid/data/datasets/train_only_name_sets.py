"""Training-only sets whose identities are in the file names (or, for AirportALERT, in the lines
of a list file): ``<pid>_<camera>_...`` and the like, read by the shared parser's field rules or,
where a name needs more, by a small ``item`` of the set's own.

Labels are upstream's strings (``"<dataset_name>_<field>"``); see
:mod:`~fastreid.data.datasets.train_only_sets` for the conventions and
:mod:`~fastreid.data.datasets.train_only_base` for the shared parser.
"""

from __future__ import annotations

import os
import re
from typing import Optional

from . import DATASET_REGISTRY
from .bases import DatasetNotFoundError, TrainOnlyDataset
from .parsing import MalformedEntryError, parse_entries, read_lines
from .train_only_base import Field, TrainOnlySet, field

__all__ = [
    "AirportALERT",
    "CAVIARa",
    "cuhkSYSU",
    "GRID",
    "PKU",
    "PRAI",
    "SenseReID",
    "Shinpuhkan",
    "VIPeR",
]


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


@DATASET_REGISTRY.register()
class CAVIARa(TrainOnlySet):
    """CAVIAR4REID (Cheng et al., BMVC 2011): ``PPPPNNN.jpg``, pid = the first 4 characters; one camera."""

    dataset_name = "caviara"
    folder_names = ("CAVIARa",)
    url = "http://www.lorisbazzani.info/caviar4reid.html"
    expected = "names '<4-digit pid><index>.jpg' such as '0001001.jpg'"
    layout = """\
  {root}/CAVIARa/
      0001001.jpg 0001002.jpg ...   (first 4 digits: pid)"""

    def item(self, path: str) -> tuple:
        pid = os.path.basename(path)[:4]
        if not pid.isdigit():
            raise MalformedEntryError("")
        return (path, self.label(pid), self.label("cam0"))


@DATASET_REGISTRY.register()
class cuhkSYSU(TrainOnlySet):  # noqa: N801  (upstream's registry name)
    """CUHK-SYSU person search (Xiao et al., CVPR 2017), cropped persons ``p<pid>_s<n>.jpg``; one camera."""

    dataset_name = "cuhksysu"
    folder_names = ("cuhk_sysu/cropped_images", "cuhksysu/cropped_images")  # upstream's, torchreid's
    url = (
        "http://www.ee.cuhk.edu.hk/~xgwang/PS/dataset.html (crop the annotated persons into cropped_images/)"
    )
    expected = "names 'p<pid>_s<image>.jpg' such as 'p1234_s5678.jpg'"
    layout = """\
  {root}/cuhk_sysu/   (or {root}/cuhksysu/)
      cropped_images/   p1234_s5678.jpg ...   (p<pid>_s<scene image>)"""
    _pattern = re.compile(r"p(-?\d+)_s(\d)")

    def item(self, path: str) -> tuple:
        match = self._pattern.search(os.path.basename(path))
        if match is None:
            raise MalformedEntryError("")
        return (path, self.label(str(int(match.group(1)))), self.label("0"))


@DATASET_REGISTRY.register()
class GRID(TrainOnlySet):
    """QMUL GRID (Loy et al., 2009): ``<pid>_<camera>_....jpeg``; pid 0000 are the unpaired gallery persons
    (kept, as upstream does)."""

    dataset_name = "grid"
    url = "http://personal.ie.cuhk.edu.hk/~ccloy/downloads_qmul_underground_reid.html (underground_reid.zip)"
    expected = "names '<pid>_<camera>_<...>.jpeg' such as '0001_1_25004_107_32_130.jpeg'"
    layout = """\
  {root}/underground_reid/   (or {root}/grid/underground_reid/)
      images/     0001_1_25004_107_32_130.jpeg ...   (upstream: probe and gallery images together)
  or, as published (torchreid's layout):
      probe/  gallery/"""
    extensions = (".jpeg",)
    pid = Field(sep="_", index=0)
    camera = Field(sep="_", index=1)
    # (folder relative to root, sub-folders holding the images)
    _layouts = (
        ("underground_reid", ("images",)),
        ("grid/underground_reid", ("images",)),
        ("underground_reid", ("probe", "gallery")),
        ("grid/underground_reid", ("probe", "gallery")),
    )

    def __init__(self, root: str = "datasets", **kwargs):
        self.root = root
        for base, subs in self._layouts:
            if all(os.path.isdir(os.path.join(root, base, s)) for s in subs):
                self.data_dir, self.image_dirs = os.path.join(root, base), subs
                break
        else:
            looked = " or ".join(os.path.join(root, b, "+".join(s)) for b, s in self._layouts)
            raise DatasetNotFoundError(self._missing_message(looked, root, self.layout))
        TrainOnlyDataset.__init__(self, lambda: self.parse(self.data_dir), **kwargs)

    def item(self, path: str) -> tuple:
        item = super().item(path)
        if not self._read(self.pid, path).isdigit():
            raise MalformedEntryError("")
        return item


class _NameFields(TrainOnlySet):
    """A flat folder of ``<pid>_<camera>_<...>`` images."""

    pid = Field(sep="_", index=0)
    camera = Field(sep="_", index=1)


@DATASET_REGISTRY.register()
class PKU(_NameFields):
    """PKU-Reid (Ma et al., 2016), ``<pid>_<camera>_<...>.png`` at 128x48."""

    dataset_name = "pku"
    folder_names = ("PKUv1a_128x48",)
    url = "https://github.com/charliememory/PKU-Reid-Dataset"
    extensions = (".png",)
    expected = "names '<pid>_<camera>_<...>.png'"
    layout = """\
  {root}/PKUv1a_128x48/
      0001_0_0001.png ...   (pid_camera_...)"""


@DATASET_REGISTRY.register()
class PRAI(_NameFields):
    """PRAI-1581 aerial images (Zhang et al., 2019), ``<pid>_<camera>_<...>.jpg``."""

    dataset_name = "prai"
    folder_names = ("PRAI-1581",)
    image_dirs = ("images",)
    probe = "images"
    url = "the authors of PRAI-1581 (Zhang et al., 2019, aerial person re-id)"
    expected = "names '<pid>_<camera>_<...>.jpg'"
    layout = """\
  {root}/PRAI-1581/
      images/   00000001_0001_00000001.jpg ...   (pid_camera_...)"""


@DATASET_REGISTRY.register()
class SenseReID(TrainOnlySet):
    """SenseReID (Zhao et al., CVPR 2017): ``test_gallery/`` and ``test_prob/`` of ``<pid>_<camera>.jpg``
    (upstream uses every image for training)."""

    dataset_name = "senseid"  # upstream's spelling
    folder_names = ("SenseReID", "sensereid/SenseReID")  # upstream's, torchreid's
    url = "the authors of Spindle Net (Zhao et al., CVPR 2017), who released SenseReID"
    expected = "names '<pid>_<camera>.jpg' such as '0000001_01.jpg'"
    layout = """\
  {root}/SenseReID/   (or {root}/sensereid/SenseReID/)
      test_gallery/   0000001_01.jpg ...   (pid_camera)
      test_prob/      (test_probe/ accepted too)"""

    def image_folders(self, folder: str) -> list[str]:
        dirs = [os.path.join(folder, "test_gallery")]
        probe = [
            os.path.join(folder, n)
            for n in ("test_prob", "test_probe")
            if os.path.isdir(os.path.join(folder, n))
        ]
        dirs += probe[:1]
        missing = [d for d in dirs if not os.path.isdir(d)] + (
            [] if probe else [os.path.join(folder, "test_prob")]
        )
        if missing:
            raise DatasetNotFoundError(self._missing_message(missing[0], self.root, self.layout))
        return dirs

    def where(self, folder: str) -> str:
        return " + ".join(self.image_folders(folder))

    def item(self, path: str) -> tuple:
        name = os.path.basename(path)
        camera = field(name, "_", 1).split(".")[0]
        if not camera:
            raise MalformedEntryError("")
        return (path, self.label(field(name, "_", 0)), self.label(camera))


@DATASET_REGISTRY.register()
class Shinpuhkan(TrainOnlySet):
    """Shinpuhkan 2014 (Kawanishi et al., 2014): ``<pid>_<x>_<camera>_<...>.jpg`` anywhere under the folder."""

    dataset_name = "shinpuhkan"
    folder_names = ("shinpuhkan",)
    url = "http://www.mm.media.kyoto-u.ac.jp/en/datasets/shinpuhkan/"
    expected = "names '<pid>_<x>_<camera>_<...>.jpg'"
    layout = """\
  {root}/shinpuhkan/
      .../0001_001_01_...jpg   (any depth; fields: pid, _, camera)"""

    tree = "recursive"
    pid = Field(sep="_", index=0)
    camera = Field(sep="_", index=2)


@DATASET_REGISTRY.register()
class VIPeR(TrainOnlySet):
    """VIPeR (Gray et al., 2007): ``cam_a/`` and ``cam_b/`` of ``<pid>_<angle>.bmp``."""

    dataset_name = "viper"
    folder_names = ("VIPeR", "viper/VIPeR")  # upstream's, torchreid's
    url = "https://vision.soe.ucsc.edu/node/178 (VIPeR.v1.0.zip)"
    expected = "names '<pid>_<angle>.bmp' such as '000_45.bmp'"
    layout = """\
  {root}/VIPeR/   (or {root}/viper/VIPeR/)
      cam_a/   000_45.bmp ...   (pid_angle)
      cam_b/"""

    image_dirs = ("cam_a", "cam_b")
    extensions = (".bmp",)
    pid = Field(sep="_", first=True)
    camera = Field(level=1)
