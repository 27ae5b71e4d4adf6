"""Tiny trees in each data set's published layout (as upstream FastReID's parsers and the data
sets' documentation describe them), for the parser tests.

``LAYOUTS[name](root)`` writes the tree of registry name ``name`` under ``root`` and returns what a
correct parser must produce: ``train`` as a sorted list of ``(file name, pid, camid)`` and, for
test sets, ``query`` / ``gallery`` likewise. ``BAD_ENTRY[name](root)`` adds one malformed entry
(a file name or list line) and returns the text a warning must name. Files are empty: no parser
reads pixels.
"""

from __future__ import annotations

import json
import os
from typing import Callable


def touch(folder, *names) -> None:
    os.makedirs(folder, exist_ok=True)
    for n in names:
        open(os.path.join(folder, n), "wb").close()


def write(path, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _train_only(folders: dict[str, tuple[str, ...]], *train: tuple[str, str, str]) -> Callable[[str], dict]:
    """The layout of a train-only set: ``folders`` (paths under the root, ``/``-separated) with
    their files (none: an empty folder), and the ``train`` rows a parser must produce."""

    def layout(root):
        for folder, names in folders.items():
            touch(os.path.join(root, *folder.split("/")), *names)
        return {"train": list(train)}

    return layout


def _market(root):
    base = os.path.join(root, "Market-1501-v15.09.15")
    touch(
        os.path.join(base, "bounding_box_train"),
        "0002_c1s1_000451_03.jpg",
        "0002_c2s1_000551_01.jpg",
        "0007_c3s3_076476_02.jpg",
    )
    touch(os.path.join(base, "query"), "0003_c1s1_001051_00.jpg")
    touch(
        os.path.join(base, "bounding_box_test"),
        "-1_c1s1_000401_03.jpg",
        "0000_c2s1_000301_01.jpg",
        "0003_c2s1_001101_01.jpg",
    )
    return {
        "train": [
            ("0002_c1s1_000451_03.jpg", "market1501_2", "market1501_0"),
            ("0002_c2s1_000551_01.jpg", "market1501_2", "market1501_1"),
            ("0007_c3s3_076476_02.jpg", "market1501_7", "market1501_2"),
        ],
        "query": [("0003_c1s1_001051_00.jpg", 3, 0)],
        "gallery": [("0000_c2s1_000301_01.jpg", 0, 1), ("0003_c2s1_001101_01.jpg", 3, 1)],
    }


def _duke(root):
    base = os.path.join(root, "DukeMTMC-reID")
    touch(os.path.join(base, "bounding_box_train"), "0001_c2_f0046182.jpg", "0001_c8_f0046300.jpg")
    touch(os.path.join(base, "query"), "0005_c2_f0046985.jpg")
    touch(os.path.join(base, "bounding_box_test"), "0005_c3_f0047000.jpg", "0006_c1_f0047100.jpg")
    return {
        "train": [
            ("0001_c2_f0046182.jpg", "dukemtmc_1", "dukemtmc_1"),
            ("0001_c8_f0046300.jpg", "dukemtmc_1", "dukemtmc_7"),
        ],
        "query": [("0005_c2_f0046985.jpg", 5, 1)],
        "gallery": [("0005_c3_f0047000.jpg", 5, 2), ("0006_c1_f0047100.jpg", 6, 0)],
    }


def _msmt(root):
    base = os.path.join(root, "MSMT17_V1")
    touch(
        os.path.join(base, "train", "0000"),
        "0000_000_01_0303morning_0015_0.jpg",
        "0000_001_05_0303morning_0016_0.jpg",
    )
    touch(os.path.join(base, "train", "0001"), "0001_000_15_0303noon_0100_1.jpg")
    touch(
        os.path.join(base, "test", "0000"),
        "0000_000_03_0303afternoon_0020_0.jpg",
        "0000_001_07_0303afternoon_0030_0.jpg",
    )
    write(
        os.path.join(base, "list_train.txt"),
        "0000/0000_000_01_0303morning_0015_0.jpg 0\n"
        "0000/0000_001_05_0303morning_0016_0.jpg 0\n0001/0001_000_15_0303noon_0100_1.jpg 1\n",
    )
    write(os.path.join(base, "list_val.txt"), "0001/0001_000_15_0303noon_0100_1.jpg 1\n")
    write(os.path.join(base, "list_query.txt"), "0000/0000_000_03_0303afternoon_0020_0.jpg 0\n")
    write(os.path.join(base, "list_gallery.txt"), "0000/0000_001_07_0303afternoon_0030_0.jpg 0\n")
    return {
        "train": [
            ("0000_000_01_0303morning_0015_0.jpg", "msmt17_0", "msmt17_0"),
            ("0000_001_05_0303morning_0016_0.jpg", "msmt17_0", "msmt17_4"),
            ("0001_000_15_0303noon_0100_1.jpg", "msmt17_1", "msmt17_14"),
        ],
        "query": [("0000_000_03_0303afternoon_0020_0.jpg", 2, 2)],  # pid + number of train ids (2)
        "gallery": [("0000_001_07_0303afternoon_0030_0.jpg", 2, 6)],
    }


def _cuhk03(root):
    base = os.path.join(root, "cuhk03")
    touch(
        os.path.join(base, "images_labeled"),
        "1_001_1_01.png",
        "1_001_2_06.png",
        "1_002_1_01.png",
        "1_002_2_07.png",
    )
    split = {
        "train": [["images_labeled/1_001_1_01.png", 0, 0], ["images_labeled/1_001_2_06.png", 0, 1]],
        "query": [["images_labeled/1_002_1_01.png", 2, 0]],
        "gallery": [["images_labeled/1_002_2_07.png", 2, 1]],
    }
    write(os.path.join(base, "splits_new_labeled.json"), json.dumps([split]))
    return {
        "train": [("1_001_1_01.png", "cuhk03_0", "cuhk03_0"), ("1_001_2_06.png", "cuhk03_0", "cuhk03_1")],
        "query": [("1_002_1_01.png", 2, 0)],
        "gallery": [("1_002_2_07.png", 2, 1)],
    }


_cuhksysu = _train_only(
    {
        "cuhk_sysu/cropped_images": ("p1_s1.jpg", "p1_s2.jpg", "p0042_s13.jpg"),
    },
    ("p0042_s13.jpg", "cuhksysu_42", "cuhksysu_0"),
    ("p1_s1.jpg", "cuhksysu_1", "cuhksysu_0"),
    ("p1_s2.jpg", "cuhksysu_1", "cuhksysu_0"),
)


_grid = _train_only(
    {
        "underground_reid/images": (
            "0001_1_25004_107_32_130.jpeg",
            "0001_5_25020_190_33_140.jpeg",
            "0000_3_25100_80_30_120.jpeg",
        ),
    },
    ("0000_3_25100_80_30_120.jpeg", "grid_0000", "grid_3"),
    ("0001_1_25004_107_32_130.jpeg", "grid_0001", "grid_1"),
    ("0001_5_25020_190_33_140.jpeg", "grid_0001", "grid_5"),
)


_ilids = _train_only(
    {
        "iLIDS/0001": ("cam1_0001.png", "cam2_0001.png"),
        "iLIDS/0002": ("cam1_0002.png",),
    },
    ("cam1_0001.png", "ilids_0001", "ilids_cam1"),
    ("cam1_0002.png", "ilids_0002", "ilids_cam1"),
    ("cam2_0001.png", "ilids_0001", "ilids_cam2"),
)


_lpw = _train_only(
    {
        "pep_256x128/data_slim/scen1/view1/1": ("00001.jpg",),
        "pep_256x128/data_slim/scen1/view2/1": ("00002.jpg",),
        "pep_256x128/data_slim/scen2/view1/1": ("00003.jpg",),
        "pep_256x128/data_slim/scen3/view3/7": ("00004.jpg",),
    },
    ("00001.jpg", "lpw_scen1-1", "lpw_view1"),
    ("00002.jpg", "lpw_scen1-1", "lpw_view2"),
    ("00003.jpg", "lpw_scen2-1", "lpw_view1"),
    ("00004.jpg", "lpw_scen3-7", "lpw_view3"),
)


_pes3d = _train_only(
    {
        "3DPeS/001": ("001_a.bmp", "001_b.bmp"),
        "3DPeS/002": ("002_a.bmp",),
    },
    ("001_a.bmp", "pes3d_001", "pes3d_cam0"),
    ("001_b.bmp", "pes3d_001", "pes3d_cam0"),
    ("002_a.bmp", "pes3d_002", "pes3d_cam0"),
)


_pku = _train_only(
    {
        "PKUv1a_128x48": ("0001_0_001.png", "0001_1_002.png", "0002_0_001.png"),
    },
    ("0001_0_001.png", "pku_0001", "pku_0"),
    ("0001_1_002.png", "pku_0001", "pku_1"),
    ("0002_0_001.png", "pku_0002", "pku_0"),
)


_prai = _train_only(
    {
        "PRAI-1581/images": ("00000001_0001_00000001.jpg", "00000001_0002_00000002.jpg"),
    },
    ("00000001_0001_00000001.jpg", "prai_00000001", "prai_0001"),
    ("00000001_0002_00000002.jpg", "prai_00000001", "prai_0002"),
)


_prid = _train_only(
    {
        "prid_2011/slim_train/person_0001": ("a_0001.png", "b_0001.png"),
        "prid_2011/slim_train/person_0002": ("a_0002.png",),
    },
    ("a_0001.png", "prid_0001", "prid_a"),
    ("a_0002.png", "prid_0002", "prid_a"),
    ("b_0001.png", "prid_0001", "prid_b"),
)


_saivt = _train_only(
    {
        "SAIVT-SoftBio/cropped_images/0001": ("person-0001-cam3-f0001.jpeg", "person-0001-cam5-f0002.jpeg"),
    },
    ("person-0001-cam3-f0001.jpeg", "saivt_0001", "saivt_cam3"),
    ("person-0001-cam5-f0002.jpeg", "saivt_0001", "saivt_cam5"),
)


_sensereid = _train_only(
    {
        "SenseReID/test_gallery": ("0000001_01.jpg", "0000002_02.jpg"),
        "SenseReID/test_prob": ("0000001_00.jpg",),
    },
    ("0000001_00.jpg", "senseid_0000001", "senseid_00"),
    ("0000001_01.jpg", "senseid_0000001", "senseid_01"),
    ("0000002_02.jpg", "senseid_0000002", "senseid_02"),
)


_shinpuhkan = _train_only(
    {
        "shinpuhkan/0001": ("0001_001_01_000.jpg", "0001_002_16_000.jpg"),
        "shinpuhkan/0002/sub": ("0002_001_03_010.jpg",),
    },
    ("0001_001_01_000.jpg", "shinpuhkan_0001", "shinpuhkan_01"),
    ("0001_002_16_000.jpg", "shinpuhkan_0001", "shinpuhkan_16"),
    ("0002_001_03_010.jpg", "shinpuhkan_0002", "shinpuhkan_03"),
)


_sysumm = _train_only(
    {
        "SYSU-MM01/cam1/0001": ("0001.jpg",),
        "SYSU-MM01/cam4/0001": ("0002.jpg",),
        "SYSU-MM01/cam2/0003": ("0001.jpg",),
        "SYSU-MM01/cam5": (),  # an empty camera folder
        "SYSU-MM01/cam3/0001": ("0003.jpg",),  # infrared: not used, as upstream
    },
    ("0001.jpg", "sysumm01_0001", "sysumm01_cam1"),
    ("0001.jpg", "sysumm01_0003", "sysumm01_cam2"),
    ("0002.jpg", "sysumm01_0001", "sysumm01_cam4"),
)


_thermalworld = _train_only(
    {
        "thermalworld_rgb/0001": ("a.jpg", "b.jpg"),
    },
    ("a.jpg", "thermalworld_0001", "thermalworld_cam0"),
    ("b.jpg", "thermalworld_0001", "thermalworld_cam0"),
)


_caviara = _train_only(
    {
        "CAVIARa": ("0001001.jpg", "0001002.jpg", "0002001.jpg"),
    },
    ("0001001.jpg", "caviara_0001", "caviara_cam0"),
    ("0001002.jpg", "caviara_0001", "caviara_cam0"),
    ("0002001.jpg", "caviara_0002", "caviara_cam0"),
)


_viper = _train_only(
    {
        "VIPeR/cam_a": ("000_45.bmp", "001_90.bmp"),
        "VIPeR/cam_b": ("000_180.bmp",),
    },
    ("000_180.bmp", "viper_000", "viper_cam_b"),
    ("000_45.bmp", "viper_000", "viper_cam_a"),
    ("001_90.bmp", "viper_001", "viper_cam_a"),
)


_wildtrack = _train_only(
    {
        "Wildtrack_crop_dataset/crop/0001": ("C1_00000000.png", "C4_00000005.png"),
    },
    ("C1_00000000.png", "wildtrack_0001", "wildtrack_C1"),
    ("C4_00000005.png", "wildtrack_0001", "wildtrack_C4"),
)


def _airport(root):
    base = os.path.join(root, "AirportALERT")
    touch(os.path.join(base, "cam10", "11001"), "img1.jpg")
    touch(os.path.join(base, "cam11", "11001"), "img2.jpg")
    touch(os.path.join(base, "cam10", "10999"), "img3.jpg")
    write(
        os.path.join(base, "filepath.txt"),
        "cam10\\11001\\img1.jpg\ncam11\\11001\\img2.jpg\ncam10\\10999\\img3.jpg\n",
    )
    return {
        "train": [
            ("img1.jpg", "airport_11001", "airport_cam10"),
            ("img2.jpg", "airport_11001", "airport_cam11"),
        ]
    }


def _veri(root):
    base = os.path.join(root, "veri")
    touch(
        os.path.join(base, "image_train"),
        "0001_c001_00016450_0.jpg",
        "0001_c002_00016500_0.jpg",
        "0002_c020_00020000_1.jpg",
    )
    touch(os.path.join(base, "image_query"), "0003_c001_00030000_0.jpg")
    touch(os.path.join(base, "image_test"), "0003_c002_00030100_0.jpg", "0004_c003_00030200_0.jpg")
    return {
        "train": [
            ("0001_c001_00016450_0.jpg", "veri_1", "veri_0"),
            ("0001_c002_00016500_0.jpg", "veri_1", "veri_1"),
            ("0002_c020_00020000_1.jpg", "veri_2", "veri_19"),
        ],
        "query": [("0003_c001_00030000_0.jpg", 3, 0)],
        "gallery": [("0003_c002_00030100_0.jpg", 3, 1), ("0004_c003_00030200_0.jpg", 4, 2)],
    }


VEHICLEID_TEST = "0000010 7\n0000011 7\n0000012 7\n0000013 9\n0000014 9\n"


def _vehicleid_tree(root):
    base = os.path.join(root, "vehicleid")
    touch(os.path.join(base, "image"), *(f"{i:07d}.jpg" for i in (1, 2, 3, 10, 11, 12, 13, 14)))
    write(os.path.join(base, "train_test_split", "train_list.txt"), "0000001 0\n0000002 0\n0000003 5\n")
    for n in (800, 1600, 2400, 13164):
        write(os.path.join(base, "train_test_split", f"test_list_{n}.txt"), VEHICLEID_TEST)
    return {
        "train": [
            ("0000001.jpg", "vehicleid_0", "vehicleid_1"),
            ("0000002.jpg", "vehicleid_0", "vehicleid_2"),
            ("0000003.jpg", "vehicleid_5", "vehicleid_3"),
        ],
        # query/gallery depend on the seeded shuffle: checked by count and vehicle
        "query_count": 3,
        "gallery_count": 2,
    }


def _veriwild_tree(root):
    base = os.path.join(root, "VERI-Wild")
    touch(os.path.join(base, "images", "00001"), "000001.jpg", "000002.jpg")
    touch(os.path.join(base, "images", "00002"), "000003.jpg")
    touch(os.path.join(base, "images", "00005"), "000010.jpg", "000011.jpg")
    split = os.path.join(base, "train_test_split")
    write(
        os.path.join(split, "vehicle_info.txt"),
        "id/image;Camera ID;Time;Model;Type;Color\n"
        "00001/000001;012;2018-03-11 11:40:45;Hyundai;SUV;white\n"
        "00001/000002;017;2018-03-11 11:52:02;Hyundai;SUV;white\n"
        "00002/000003;012;2018-03-12 09:00:00;Volkswagen;sedan;black\n"
        "00005/000010;003;2018-03-13 10:00:00;Buick;MPV;red\n"
        "00005/000011;004;2018-03-13 10:05:00;Buick;MPV;red\n",
    )
    write(os.path.join(split, "train_list.txt"), "00001/000001\n00001/000002\n00002/000003\n")
    for n in (3000, 5000, 10000):
        write(os.path.join(split, f"test_{n}_query.txt"), "00005/000010\n")
        write(os.path.join(split, f"test_{n}.txt"), "00005/000011\n")
    return {
        "train": [
            ("000001.jpg", "veriwild_1", "veriwild_12"),
            ("000002.jpg", "veriwild_1", "veriwild_17"),
            ("000003.jpg", "veriwild_2", "veriwild_12"),
        ],
        "query": [("000010.jpg", 5, 3)],
        "gallery": [("000011.jpg", 5, 4)],
    }


LAYOUTS: dict[str, Callable] = {
    "Market1501": _market,
    "DukeMTMC": _duke,
    "MSMT17": _msmt,
    "CUHK03": _cuhk03,
    "cuhkSYSU": _cuhksysu,
    "GRID": _grid,
    "iLIDS": _ilids,
    "LPW": _lpw,
    "PeS3D": _pes3d,
    "PKU": _pku,
    "PRAI": _prai,
    "PRID": _prid,
    "SAIVT": _saivt,
    "SenseReID": _sensereid,
    "Shinpuhkan": _shinpuhkan,
    "SYSU_mm": _sysumm,
    "Thermalworld": _thermalworld,
    "CAVIARa": _caviara,
    "VIPeR": _viper,
    "WildTrackCrop": _wildtrack,
    "AirportALERT": _airport,
    "VeRi": _veri,
    "VehicleID": _vehicleid_tree,
    "SmallVehicleID": _vehicleid_tree,
    "MediumVehicleID": _vehicleid_tree,
    "LargeVehicleID": _vehicleid_tree,
    "VeRiWild": _veriwild_tree,
    "SmallVeRiWild": _veriwild_tree,
    "MediumVeRiWild": _veriwild_tree,
    "LargeVeRiWild": _veriwild_tree,
}


def _append(path, line):
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
    return line


BAD_ENTRY: dict[str, Callable] = {
    "Market1501": lambda r: (
        touch(os.path.join(r, "Market-1501-v15.09.15", "bounding_box_train"), "holiday.jpg") or "holiday.jpg"
    ),
    "DukeMTMC": lambda r: (
        touch(os.path.join(r, "DukeMTMC-reID", "bounding_box_train"), "0001_c9_f1.jpg") or "0001_c9_f1.jpg"
    ),
    "MSMT17": lambda r: _append(os.path.join(r, "MSMT17_V1", "list_train.txt"), "0000/broken.jpg zero"),
    "CUHK03": None,
    "cuhkSYSU": lambda r: touch(os.path.join(r, "cuhk_sysu", "cropped_images"), "scene.jpg") or "scene.jpg",
    "GRID": lambda r: touch(os.path.join(r, "underground_reid", "images"), "readme.jpeg") or "readme.jpeg",
    "iLIDS": lambda r: touch(os.path.join(r, "iLIDS", "0001"), "thumbnail.png") or "thumbnail.png",
    "LPW": None,  # every name is valid: pid and camera come from folders
    "PeS3D": None,
    "PKU": lambda r: touch(os.path.join(r, "PKUv1a_128x48"), "sample.png") or "sample.png",
    "PRAI": lambda r: touch(os.path.join(r, "PRAI-1581", "images"), "sample.jpg") or "sample.jpg",
    "PRID": lambda r: touch(os.path.join(r, "prid_2011", "slim_train", "extra"), "a_1.png") or "a_1.png",
    "SAIVT": lambda r: (
        touch(os.path.join(r, "SAIVT-SoftBio", "cropped_images", "0001"), "thumb.jpeg") or "thumb.jpeg"
    ),
    "SenseReID": lambda r: touch(os.path.join(r, "SenseReID", "test_gallery"), "sample.jpg") or "sample.jpg",
    "Shinpuhkan": lambda r: touch(os.path.join(r, "shinpuhkan", "0001"), "0001_x.jpg") or "0001_x.jpg",
    "SYSU_mm": None,
    "Thermalworld": None,
    "CAVIARa": lambda r: touch(os.path.join(r, "CAVIARa"), "cover.jpg") or "cover.jpg",
    "VIPeR": lambda r: touch(os.path.join(r, "VIPeR", "cam_a"), "index.bmp") or "index.bmp",
    "WildTrackCrop": lambda r: (
        touch(os.path.join(r, "Wildtrack_crop_dataset", "crop", "0001"), "mask.png") or "mask.png"
    ),
    "AirportALERT": lambda r: _append(os.path.join(r, "AirportALERT", "filepath.txt"), "broken-line"),
    "VeRi": lambda r: (
        touch(os.path.join(r, "veri", "image_train"), "0001_c021_00000000_0.jpg")
        or "0001_c021_00000000_0.jpg"
    ),
    "VehicleID": lambda r: _append(
        os.path.join(r, "vehicleid", "train_test_split", "train_list.txt"), "0000099"
    ),
    "VeRiWild": lambda r: _append(
        os.path.join(r, "VERI-Wild", "train_test_split", "train_list.txt"), "00009/000999"
    ),
}
