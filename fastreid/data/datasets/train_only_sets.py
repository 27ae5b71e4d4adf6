"""The person re-ID sets upstream FastReID uses for training only (they add identities to
``DATASETS.NAMES``; none has a query/gallery split).

Identities and cameras are the strings upstream builds (``"<dataset_name>_<field>"``, the field
taken verbatim from the folder or file name), so a combined training run relabels exactly as
upstream's does. Folders and names follow upstream's parsers; file order is sorted (upstream's
``glob`` order depends on the file system).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Callable, Optional

from . import DATASET_REGISTRY
from .bases import DatasetNotFoundError, TrainOnlyDataset
from .parsing import Malformed, list_images, list_subfolders, parse_entries, read_lines

__all__ = [
    "AirportALERT", "CAVIARa", "cuhkSYSU", "GRID", "iLIDS", "LPW", "PeS3D", "PKU", "PRAI", "PRID", "SAIVT",
    "SenseReID", "Shinpuhkan", "SYSU_mm", "Thermalworld", "VIPeR", "WildTrackCrop",
]


def _field(value: str, sep: str, index: int) -> str:
    """``value.split(sep)[index]``, which must exist and be non-empty."""
    parts = value.split(sep)
    if len(parts) <= index or not parts[index]:
        raise Malformed(f"no field {index + 1} separated by {sep!r}")
    return parts[index]


def _before(value: str, sep: str) -> str:
    """The part of ``value`` before the first ``sep``, which must be there and leave something."""
    head, found, _ = value.partition(sep)
    if not found or not head:
        raise Malformed(f"no {sep!r} in the name")
    return head


class _TrainOnlySet(TrainOnlyDataset):
    """Shared steps: find the folder (upstream's name first, then aliases), parse, prefix."""

    folder_names: Sequence[str] = ()
    #: What a valid entry looks like, for messages.
    expected = ""

    def __init__(self, root: str = "datasets", **kwargs):
        self.root = root
        self.data_dir = self.locate(root, self.folder_names)
        super().__init__(lambda: self.parse(self.data_dir), **kwargs)

    def parse(self, folder: str) -> list:
        raise NotImplementedError

    def label(self, value: str) -> str:
        return f"{self.dataset_name}_{value}"

    def parse_files(self, where: str, paths: list[str], parse: Callable[[str], Optional[tuple]]) -> list:
        return parse_entries(type(self).__name__, where, [(p, p) for p in paths], parse, self.expected)

    def per_identity_folders(self, folder: str, extensions: Sequence[str],
                             camera: Callable[[str], str]) -> list:
        """``<folder>/<pid>/<image>``: the pid is the folder name, ``camera(file name)`` the camera."""
        paths = [p for pid in list_subfolders(folder) for p in list_images(os.path.join(folder, pid), extensions)]

        def parse(path: str) -> tuple:
            pid = os.path.basename(os.path.dirname(path))
            return (path, self.label(pid), self.label(camera(os.path.basename(path))))

        return self.parse_files(folder, paths, parse)


@DATASET_REGISTRY.register()
class AirportALERT(_TrainOnlySet):
    """Airport ALERT (Gou et al., 2018): images listed in ``filepath.txt`` as ``<camera>\\<pid>\\<file>``;
    as upstream, only pids >= 11001 are used."""

    dataset_name = "airport"
    folder_names = ("AirportALERT",)
    url = ("http://www.northeastern.edu/alert/transitioning-technology/alert-datasets/"
           "alert-airport-re-identification-dataset/")
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
            camera, pid = _field(line, "\\", 0), _field(line, "\\", 1)
            if int(pid) < 11001:
                return None  # upstream's filter
            return (os.path.join(folder, *parts), self.label(pid), self.label(camera))

        return parse_entries(type(self).__name__, list_file, read_lines(list_file), parse, self.expected)


@DATASET_REGISTRY.register()
class CAVIARa(_TrainOnlySet):
    """CAVIAR4REID (Cheng et al., BMVC 2011): ``PPPPNNN.jpg``, pid = the first 4 characters; one camera."""

    dataset_name = "caviara"
    folder_names = ("CAVIARa",)
    url = "http://www.lorisbazzani.info/caviar4reid.html"
    expected = "names '<4-digit pid><index>.jpg' such as '0001001.jpg'"
    layout = """\
  {root}/CAVIARa/
      0001001.jpg 0001002.jpg ...   (first 4 digits: pid)"""

    def parse(self, folder: str) -> list:
        def parse(path: str) -> tuple:
            pid = os.path.basename(path)[:4]
            if not pid.isdigit():
                raise Malformed("")
            return (path, self.label(pid), self.label("cam0"))

        return self.parse_files(folder, list_images(folder, (".jpg",)), parse)


@DATASET_REGISTRY.register()
class cuhkSYSU(_TrainOnlySet):  # noqa: N801  (upstream's registry name)
    """CUHK-SYSU person search (Xiao et al., CVPR 2017), cropped persons ``p<pid>_s<n>.jpg``; one camera."""

    dataset_name = "cuhksysu"
    folder_names = ("cuhk_sysu/cropped_images", "cuhksysu/cropped_images")  # upstream's, torchreid's
    url = "http://www.ee.cuhk.edu.hk/~xgwang/PS/dataset.html (crop the annotated persons into cropped_images/)"
    expected = "names 'p<pid>_s<image>.jpg' such as 'p1234_s5678.jpg'"
    layout = """\
  {root}/cuhk_sysu/   (or {root}/cuhksysu/)
      cropped_images/   p1234_s5678.jpg ...   (p<pid>_s<scene image>)"""
    _pattern = re.compile(r"p(-?\d+)_s(\d)")

    def parse(self, folder: str) -> list:
        def parse(path: str) -> tuple:
            match = self._pattern.search(os.path.basename(path))
            if match is None:
                raise Malformed("")
            return (path, self.label(str(int(match.group(1)))), self.label("0"))

        return self.parse_files(folder, list_images(folder, (".jpg",)), parse)


@DATASET_REGISTRY.register()
class GRID(_TrainOnlySet):
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
    # (folder relative to root, sub-folders holding the images)
    _layouts = (("underground_reid", ("images",)), ("grid/underground_reid", ("images",)),
                ("underground_reid", ("probe", "gallery")), ("grid/underground_reid", ("probe", "gallery")))

    def __init__(self, root: str = "datasets", **kwargs):
        self.root = root
        for base, subs in self._layouts:
            dirs = [os.path.join(root, base, s) for s in subs]
            if all(os.path.isdir(d) for d in dirs):
                self.image_dirs = dirs
                break
        else:
            looked = " or ".join(os.path.join(root, b, "+".join(s)) for b, s in self._layouts)
            raise DatasetNotFoundError(self._missing_message(looked, root, self.layout))
        self.data_dir = os.path.dirname(self.image_dirs[0])
        TrainOnlyDataset.__init__(self, lambda: self.parse(self.data_dir), **kwargs)

    def parse(self, folder: str) -> list:
        def parse(path: str) -> tuple:
            name = os.path.basename(path)
            pid, camera = _field(name, "_", 0), _field(name, "_", 1)
            if not pid.isdigit():
                raise Malformed("")
            return (path, self.label(pid), self.label(camera))

        paths = [p for d in self.image_dirs for p in list_images(d, (".jpeg",))]
        return self.parse_files(" + ".join(self.image_dirs), paths, parse)


@DATASET_REGISTRY.register()
class iLIDS(_TrainOnlySet):  # noqa: N801  (upstream's registry name)
    """i-LIDS person images, one folder per identity, ``<camera>_<...>.png``."""

    dataset_name = "ilids"
    folder_names = ("iLIDS",)
    url = "http://www.eecs.qmul.ac.uk/~jason/data/i-LIDS_Pedestrian.tgz (arranged one folder per person)"
    expected = "'<pid>/<camera>_<...>.png'"
    layout = """\
  {root}/iLIDS/
      <pid>/   cam1_0001.png ...   (folder name: pid; file name up to the first '_': camera)"""

    def parse(self, folder: str) -> list:
        return self.per_identity_folders(folder, (".png",), lambda name: _before(name, "_"))


@DATASET_REGISTRY.register()
class LPW(_TrainOnlySet):
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

    def parse(self, folder: str) -> list:
        paths = []
        for scene in ("scen1", "scen2", "scen3"):
            scene_dir = os.path.join(folder, scene)
            if not os.path.isdir(scene_dir):
                continue
            for camera in list_subfolders(scene_dir):
                for pid in list_subfolders(os.path.join(scene_dir, camera)):
                    paths += list_images(os.path.join(scene_dir, camera, pid), (".jpg",))

        def parse(path: str) -> tuple:
            pid_dir = os.path.dirname(path)
            camera_dir = os.path.dirname(pid_dir)
            scene = os.path.basename(os.path.dirname(camera_dir))
            return (path, self.label(f"{scene}-{os.path.basename(pid_dir)}"), self.label(os.path.basename(camera_dir)))

        return self.parse_files(folder, paths, parse)


@DATASET_REGISTRY.register()
class PeS3D(_TrainOnlySet):
    """3DPeS (Baltieri et al., 2011), one folder per identity of ``.bmp`` images; one camera."""

    dataset_name = "pes3d"
    folder_names = ("3DPeS",)
    url = "http://www.openvisor.org/3dpes.asp"
    expected = "'<pid>/<image>.bmp'"
    layout = """\
  {root}/3DPeS/
      <pid>/   *.bmp"""

    def parse(self, folder: str) -> list:
        return self.per_identity_folders(folder, (".bmp",), lambda name: "cam0")


class _NameFields(_TrainOnlySet):
    """A flat folder of ``<pid>_<camera>_<...>`` images."""

    image_subdir = ""
    extensions: Sequence[str] = (".jpg",)

    def parse(self, folder: str) -> list:
        image_dir = os.path.join(folder, self.image_subdir) if self.image_subdir else folder

        def parse(path: str) -> tuple:
            name = os.path.basename(path)
            return (path, self.label(_field(name, "_", 0)), self.label(_field(name, "_", 1)))

        return self.parse_files(image_dir, list_images(image_dir, self.extensions), parse)


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
    image_subdir = "images"
    url = "the authors of PRAI-1581 (Zhang et al., 2019, aerial person re-id)"
    expected = "names '<pid>_<camera>_<...>.jpg'"
    layout = """\
  {root}/PRAI-1581/
      images/   00000001_0001_00000001.jpg ...   (pid_camera_...)"""

    def __init__(self, root: str = "datasets", **kwargs):
        self.root = root
        self.data_dir = self.locate(root, self.folder_names, probe="images")
        TrainOnlyDataset.__init__(self, lambda: self.parse(self.data_dir), **kwargs)


@DATASET_REGISTRY.register()
class PRID(_TrainOnlySet):
    """PRID 2011 (Hirzer et al., SCIA 2011) as upstream reads it: ``slim_train/<x>_<pid>/<camera>_<...>.png``."""

    dataset_name = "prid"
    folder_names = ("prid_2011/slim_train", "prid2011/prid_2011/slim_train")  # upstream's, under torchreid's folder
    url = "https://www.tugraz.at/institute/icg/research/team-bischof/lrs/downloads/PRID11/"
    expected = "'<name>_<pid>/<camera>_<...>.png'"
    layout = """\
  {root}/prid_2011/
      slim_train/
          person_0001/   a_0001.png ...   (folder: <x>_<pid>; file: <camera>_<...>)"""

    def parse(self, folder: str) -> list:
        def parse(path: str) -> tuple:
            pid = _field(os.path.basename(os.path.dirname(path)), "_", 1)
            return (path, self.label(pid), self.label(_field(os.path.basename(path), "_", 0)))

        paths = [p for p in list_images(folder, (".png",), recursive=True) if os.path.dirname(p) != folder]
        return self.parse_files(folder, paths, parse)


@DATASET_REGISTRY.register()
class SAIVT(_TrainOnlySet):
    """SAIVT-SoftBio (Bialkowski et al., 2012): ``cropped_images/<pid>/<a>-<b>-<camera>-<...>.jpeg``."""

    dataset_name = "saivt"
    folder_names = ("SAIVT-SoftBio/cropped_images",)
    url = "https://researchdatafinder.qut.edu.au/display/n27416"
    expected = "'<pid>/<a>-<b>-<camera>-<...>.jpeg'"
    layout = """\
  {root}/SAIVT-SoftBio/
      cropped_images/
          <pid>/   <a>-<b>-<camera>-<...>.jpeg   (third '-' field: camera)"""

    def parse(self, folder: str) -> list:
        return self.per_identity_folders(folder, (".jpeg",), lambda name: _field(name, "-", 2))


@DATASET_REGISTRY.register()
class SenseReID(_TrainOnlySet):
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

    def parse(self, folder: str) -> list:
        dirs = [os.path.join(folder, "test_gallery")]
        probe = [os.path.join(folder, n) for n in ("test_prob", "test_probe") if os.path.isdir(os.path.join(folder, n))]
        dirs += probe[:1]
        missing = [d for d in dirs if not os.path.isdir(d)] + ([] if probe else [os.path.join(folder, "test_prob")])
        if missing:
            raise DatasetNotFoundError(self._missing_message(missing[0], self.root, self.layout))

        def parse(path: str) -> tuple:
            name = os.path.basename(path)
            camera = _field(name, "_", 1).split(".")[0]
            if not camera:
                raise Malformed("")
            return (path, self.label(_field(name, "_", 0)), self.label(camera))

        return self.parse_files(" + ".join(dirs), [p for d in dirs for p in list_images(d, (".jpg",))], parse)


@DATASET_REGISTRY.register()
class Shinpuhkan(_TrainOnlySet):
    """Shinpuhkan 2014 (Kawanishi et al., 2014): ``<pid>_<x>_<camera>_<...>.jpg`` anywhere under the folder."""

    dataset_name = "shinpuhkan"
    folder_names = ("shinpuhkan",)
    url = "http://www.mm.media.kyoto-u.ac.jp/en/datasets/shinpuhkan/"
    expected = "names '<pid>_<x>_<camera>_<...>.jpg'"
    layout = """\
  {root}/shinpuhkan/
      .../0001_001_01_...jpg   (any depth; fields: pid, _, camera)"""

    def parse(self, folder: str) -> list:
        def parse(path: str) -> tuple:
            name = os.path.basename(path)
            return (path, self.label(_field(name, "_", 0)), self.label(_field(name, "_", 2)))

        return self.parse_files(folder, list_images(folder, (".jpg",), recursive=True), parse)


@DATASET_REGISTRY.register()
class SYSU_mm(_TrainOnlySet):  # noqa: N801  (upstream's registry name)
    """SYSU-MM01 (Wu et al., ICCV 2017), the RGB cameras 1, 2, 4 and 5: ``cam<k>/<pid>/*.jpg``."""

    dataset_name = "sysumm01"
    folder_names = ("SYSU-MM01",)
    url = "https://github.com/wuancong/SYSU-MM01"
    expected = "'cam<k>/<pid>/<image>.jpg'"
    layout = """\
  {root}/SYSU-MM01/
      cam1/  cam2/  cam4/  cam5/     (the RGB cameras; cam3/ and cam6/ are infrared, unused)
          0001/   0001.jpg ..."""

    def parse(self, folder: str) -> list:
        paths = []
        for camera in ("cam1", "cam2", "cam4", "cam5"):
            cam_dir = os.path.join(folder, camera)
            if os.path.isdir(cam_dir):
                paths += [p for pid in list_subfolders(cam_dir) for p in list_images(os.path.join(cam_dir, pid), (".jpg",))]

        def parse(path: str) -> tuple:
            pid_dir = os.path.dirname(path)
            return (path, self.label(os.path.basename(pid_dir)), self.label(os.path.basename(os.path.dirname(pid_dir))))

        return self.parse_files(folder + "/cam{1,2,4,5}", paths, parse)


@DATASET_REGISTRY.register()
class Thermalworld(_TrainOnlySet):
    """ThermalWorld, its RGB images (Kniaz et al., ECCVW 2018): one folder per identity; one camera."""

    dataset_name = "thermalworld"
    folder_names = ("thermalworld_rgb",)
    url = "the authors of ThermalGAN (Kniaz et al., ECCV Workshops 2018), who released ThermalWorld"
    expected = "'<pid>/<image>.jpg'"
    layout = """\
  {root}/thermalworld_rgb/
      <pid>/   *.jpg"""

    def parse(self, folder: str) -> list:
        return self.per_identity_folders(folder, (".jpg",), lambda name: "cam0")


@DATASET_REGISTRY.register()
class VIPeR(_TrainOnlySet):
    """VIPeR (Gray et al., 2007): ``cam_a/`` and ``cam_b/`` of ``<pid>_<angle>.bmp``."""

    dataset_name = "viper"
    folder_names = ("VIPeR", "viper/VIPeR")  # upstream's, torchreid's
    url = "https://vision.soe.ucsc.edu/node/178 (VIPeR.v1.0.zip)"
    expected = "names '<pid>_<angle>.bmp' such as '000_45.bmp'"
    layout = """\
  {root}/VIPeR/   (or {root}/viper/VIPeR/)
      cam_a/   000_45.bmp ...   (pid_angle)
      cam_b/"""

    def parse(self, folder: str) -> list:
        dirs = [os.path.join(folder, c) for c in ("cam_a", "cam_b")]
        for d in dirs:
            if not os.path.isdir(d):
                raise DatasetNotFoundError(self._missing_message(d, self.root, self.layout))

        def parse(path: str) -> tuple:
            name = os.path.basename(path)
            pid = _before(name, "_")
            return (path, self.label(pid), self.label(os.path.basename(os.path.dirname(path))))

        return self.parse_files(folder, [p for d in dirs for p in list_images(d, (".bmp",))], parse)


@DATASET_REGISTRY.register()
class WildTrackCrop(_TrainOnlySet):
    """Persons cropped from WILDTRACK (Chavdarova et al., CVPR 2018): ``crop/<pid>/<camera>_<...>.png``."""

    dataset_name = "wildtrack"
    folder_names = ("Wildtrack_crop_dataset/crop",)
    url = "https://www.epfl.ch/labs/cvlab/data/data-wildtrack/ (crop the annotated boxes into crop/<pid>/)"
    expected = "'<pid>/<camera>_<...>.png'"
    layout = """\
  {root}/Wildtrack_crop_dataset/
      crop/
          <pid>/   C1_00000000.png ...   (camera_frame)"""

    def parse(self, folder: str) -> list:
        return self.per_identity_folders(folder, (".png",), lambda name: _before(name, "_"))
