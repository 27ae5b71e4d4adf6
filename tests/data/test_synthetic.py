"""The synthetic Market-1501: layout Market1501 reads, file names, determinism."""

from __future__ import annotations

import hashlib
import os
import re

import pytest

from fastreid.data.datasets import Market1501
from fastreid.data.synthetic.persons import SyntheticSpec, generate_market1501, main, raw_pixel_baseline
from fastreid.data.synthetic.tree import MARKER_NAME, GeneratedTreeError, read_marker

NAME = re.compile(r"^(-1|\d{4})_c[1-6]s[1-6]_\d{6}_\d{2}\.jpg$")


def _digest(folder):
    h = hashlib.sha256()
    for dirpath, _, files in sorted(os.walk(folder)):
        for f in sorted(files):
            h.update(f.encode())
            with open(os.path.join(dirpath, f), "rb") as fh:
                h.update(fh.read())
    return h.hexdigest()


@pytest.fixture(scope="module")
def small_set(tmp_path_factory):
    root = tmp_path_factory.mktemp("syn")
    out = generate_market1501(str(root), SyntheticSpec.small(seed=3))
    return root, out


def test_layout_names_and_market_reader(small_set):
    root, out = small_set
    spec = SyntheticSpec.small()
    for d in ("bounding_box_train", "bounding_box_test", "query"):
        names = os.listdir(os.path.join(out, d))
        assert names and all(NAME.match(n) for n in names), names[:3]
    gallery_names = os.listdir(os.path.join(out, "bounding_box_test"))
    assert sum(n.startswith("0000_") for n in gallery_names) == spec.num_distractors
    assert sum(n.startswith("-1_") for n in gallery_names) == spec.num_junk

    ds = Market1501(root=str(root))
    assert ds.num_train_pids == spec.num_train_ids
    test_ids = {p for _, p, _ in ds.query}
    assert len(test_ids) == spec.num_test_ids
    assert test_ids <= {p for _, p, _ in ds.gallery} | {0}
    assert not test_ids & {int(p.split("_")[1]) for _, p, _ in ds.train}  # disjoint train / test ids
    # every query has a gallery match from another camera (a valid Market query)
    gallery = {(p, c) for _, p, c in ds.gallery}
    for _, pid, cam in ds.query:
        assert any(p == pid and c != cam for p, c in gallery)

    from PIL import Image

    with Image.open(ds.train[0][0]) as im:
        assert im.size == (64, 128) and im.mode == "RGB"


def test_same_seed_same_bytes_other_seed_differs(small_set, tmp_path):
    _, out = small_set
    again = generate_market1501(str(tmp_path / "a"), SyntheticSpec.small(seed=3))
    assert _digest(again) == _digest(out)
    other = generate_market1501(str(tmp_path / "b"), SyntheticSpec.small(seed=4))
    assert _digest(other) != _digest(out)


def _snapshot(folder):
    """Every file under ``folder`` with its bytes."""
    out = {}
    for dirpath, _, files in os.walk(folder):
        for f in files:
            p = os.path.join(dirpath, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, folder)] = fh.read()
    return out


@pytest.fixture
def real_market(tmp_path):
    """A user's Market-1501 without gt_bbox/gt_query (the folder the old generator deleted)."""
    base = tmp_path / "Market-1501-v15.09.15"
    for d, name in (
        ("bounding_box_train", "0002_c1s1_000451_03.jpg"),
        ("bounding_box_test", "0003_c2s1_000301_01.jpg"),
        ("query", "0003_c1s1_001051_00.jpg"),
    ):
        (base / d).mkdir(parents=True)
        (base / d / name).write_bytes(b"\xff\xd8 the user's only copy " + d.encode())
    return tmp_path, base


def test_refuses_foreign_folder_and_leaves_every_byte(real_market, capsys):
    root, base = real_market
    before = _snapshot(base)
    with pytest.raises(GeneratedTreeError, match="was not written by") as info:
        generate_market1501(str(root), SyntheticSpec.small())
    assert str(base) in str(info.value) and "--overwrite" in str(info.value)
    assert _snapshot(base) == before
    assert sorted(os.listdir(root)) == ["Market-1501-v15.09.15"]  # no temporary folder left behind

    assert main(["--root", str(root), "--small"]) == 1  # the CLI: one line, exit 1
    err = capsys.readouterr().err
    assert "GeneratedTreeError" in err and str(base) in err and len(err.strip().splitlines()) == 1
    assert _snapshot(base) == before


def test_overwrite_moves_the_old_tree_aside(real_market, capsys):
    root, base = real_market
    before = _snapshot(base)
    assert main(["--root", str(root), "--small", "--overwrite"]) == 0
    assert "moved the existing" in capsys.readouterr().out
    aside = [d for d in os.listdir(root) if d.startswith("Market-1501-v15.09.15.old-")]
    assert len(aside) == 1 and _snapshot(root / aside[0]) == before
    assert read_marker(str(base))["what"] == "synthetic Market-1501"
    assert Market1501(root=str(root)).num_train_pids == SyntheticSpec.small().num_train_ids


def test_marked_tree_is_regenerated_in_place(tmp_path):
    out = generate_market1501(str(tmp_path), SyntheticSpec.small(seed=1))
    first = _snapshot(out)
    os.makedirs(os.path.join(out, "bounding_box_train", ".cache"))
    cache = os.path.join(out, "bounding_box_train", ".cache", "decoded_64x32_3_0123456789ab")
    with open(cache + ".json", "w") as f:
        f.write('{"tag": "fastreid decoded cache", "version": 1}')
    with open(cache + ".u8", "wb") as f:
        f.write(b"\0" * 10)
    generate_market1501(str(tmp_path), SyntheticSpec.small(seed=2))
    second = _snapshot(out)
    assert second != first and not any(".cache" in k for k in second)  # derived cache files went too
    assert sorted(os.listdir(tmp_path)) == ["Market-1501-v15.09.15"]  # nothing moved aside
    marker = read_marker(out)
    assert marker["info"]["seed"] == 2
    assert sorted(marker["files"]) == sorted(k.replace(os.sep, "/") for k in second if k != MARKER_NAME)


def test_marked_tree_with_a_foreign_file_is_refused(tmp_path):
    out = generate_market1501(str(tmp_path), SyntheticSpec.small(seed=1))
    mine = os.path.join(out, "query", "0003_c1s1_001051_00.jpg")
    with open(mine, "wb") as f:
        f.write(b"my own query image")
    before = _snapshot(out)
    with pytest.raises(GeneratedTreeError, match="0003_c1s1_001051_00.jpg"):
        generate_market1501(str(tmp_path), SyntheticSpec.small(seed=2))
    assert _snapshot(out) == before


def test_failed_generation_leaves_target_untouched(real_market, monkeypatch):
    from fastreid.data.synthetic import persons as synthetic

    root, base = real_market
    before = _snapshot(base)

    def boom(*args):
        raise RuntimeError("disk trouble")

    monkeypatch.setattr(synthetic, "_write_person_images", boom)
    with pytest.raises(RuntimeError, match="disk trouble"):
        generate_market1501(str(root), SyntheticSpec.small(), overwrite=True)
    assert _snapshot(base) == before and sorted(os.listdir(root)) == ["Market-1501-v15.09.15"]


def test_cli_no_overwrite_refuses_even_own_tree(tmp_path, capsys):
    assert main(["--root", str(tmp_path), "--small", "--seed", "1"]) == 0
    assert "wrote" in capsys.readouterr().out
    assert main(["--root", str(tmp_path), "--small", "--no-overwrite"]) == 1
    assert "not replacing" in capsys.readouterr().err
    assert main(["--root", str(tmp_path), "--small", "--seed", "2"]) == 0  # its own tree: regenerated


def test_invalid_spec():
    with pytest.raises(ValueError, match="at most 1500"):  # SyntheticSpecError, a ValueError
        SyntheticSpec(num_train_ids=1000, num_test_ids=600).validate()


def test_raw_pixel_baseline_runs(small_set):
    _, out = small_set
    res = raw_pixel_baseline(out)
    assert res["queries"] > 0 and 0.0 <= res["Rank-1"] <= 100.0


VERI_NAME = re.compile(r"^\d{4}_c(0[0-1]\d|020)_\d{8}_[01]\.jpg$")


def test_vehicle_set_in_veri_layout(tmp_path):
    from fastreid.data.datasets import VeRi
    from fastreid.data.synthetic.vehicles import VehicleSpec, generate_veri

    spec = VehicleSpec.small(seed=2)
    out = generate_veri(str(tmp_path), spec)
    assert out == os.path.join(str(tmp_path), "veri")
    for split, listing in (
        ("image_train", "name_train.txt"),
        ("image_query", "name_query.txt"),
        ("image_test", "name_test.txt"),
    ):
        names = sorted(os.listdir(os.path.join(out, split)))
        assert names and all(VERI_NAME.match(n) for n in names), names[:3]
        with open(os.path.join(out, listing)) as f:
            assert f.read().split() == names
    ds = VeRi(root=str(tmp_path))
    assert ds.num_train_pids == spec.num_train_ids
    assert len({p for _, p, _ in ds.query}) == spec.num_test_ids
    gallery = {(p, c) for _, p, c in ds.gallery}
    for _, pid, cam in ds.query:  # every query has a match from another camera
        assert any(p == pid and c != cam for p, c in gallery)
    assert read_marker(out)["what"] == "synthetic VeRi"

    again = generate_veri(str(tmp_path / "again"), spec)
    assert _digest(again) == _digest(out)
    generate_veri(str(tmp_path), VehicleSpec.small(seed=3))  # its own tree: regenerated in place
    assert _digest(out) != _digest(again)


def test_vehicle_generator_refuses_a_real_veri(tmp_path, capsys):
    from fastreid.data.synthetic.vehicles import main as vehicles_main

    real = tmp_path / "veri" / "image_train"
    real.mkdir(parents=True)
    (real / "0001_c001_00016450_0.jpg").write_bytes(b"a real VeRi image")
    before = _snapshot(tmp_path)
    assert vehicles_main(["--root", str(tmp_path), "--small"]) == 1
    assert "was not written by" in capsys.readouterr().err
    assert _snapshot(tmp_path) == before
    assert vehicles_main(["--root", str(tmp_path), "--small", "--overwrite"]) == 0
    (aside,) = [d for d in os.listdir(tmp_path) if d.startswith("veri.old-")]
    assert _snapshot(tmp_path / aside) == {
        os.path.join("image_train", "0001_c001_00016450_0.jpg"): b"a real VeRi image"
    }


@pytest.mark.slow
def test_veri_config_trains_one_epoch_and_evaluates_on_synthetic_vehicles(tmp_path, run_tool):
    """The issue's acceptance run: configs/VeRi/sbs_R50-ibn.yml on the CPU, as a user runs it
    (tools/train_net.py's command line, in this process: the script's own process is tested by
    tests/engine/test_reliability_tool.py)."""
    import json

    from fastreid.cli.train import run as train_run
    from fastreid.data.synthetic.vehicles import VehicleSpec, generate_veri

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    generate_veri(str(tmp_path / "data"), VehicleSpec.small(seed=1))
    out = tmp_path / "out"
    args = [
        "--config-file",
        os.path.join(repo, "configs", "VeRi", "sbs_R50-ibn.yml"),
        "MODEL.DEVICE",
        "cpu",
        "MODEL.BACKBONE.PRETRAIN",
        "False",
        "MODEL.BACKBONE.DEPTH",
        "18x",
        "MODEL.BACKBONE.FEAT_DIM",
        "512",
        "INPUT.SIZE_TRAIN",
        "[64, 64]",
        "INPUT.SIZE_TEST",
        "[64, 64]",
        "SOLVER.IMS_PER_BATCH",
        "16",
        "DATALOADER.NUM_INSTANCE",
        "4",
        "DATALOADER.NUM_WORKERS",
        "0",
        "SOLVER.MAX_EPOCH",
        "1",
        "SOLVER.AMP.ENABLED",
        "False",
        "TEST.IMS_PER_BATCH",
        "32",
        "OUTPUT_DIR",
        str(out),
    ]
    done = run_tool(
        train_run, *args, env={"FASTREID_DATASETS": str(tmp_path / "data")},
        script=os.path.join(repo, "tools", "train_net.py"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert (out / "model_final.pth").is_file()
    with open(out / "evaluation_results.json") as f:
        results = json.load(f)
    text = json.dumps(results)
    assert "Rank-1" in text and "mAP" in text


@pytest.mark.parametrize(
    "config, layout",
    [
        ("configs/VehicleID/bagtricks_R50-ibn.yml", "vehicleid"),
        ("configs/VERIWild/bagtricks_R50-ibn.yml", "veriwild"),
        ("configs/VeRi/sbs_R50-ibn.yml", "veri"),
    ],
)
def test_vehicle_layouts_feed_their_configs(config, layout, tmp_path, monkeypatch):
    """Each vehicle config's training set and every test set load from the generated layout."""
    from fastreid.config import get_cfg
    from fastreid.data.build import build_reid_test_loader, build_reid_train_loader
    from fastreid.data.synthetic.vehicles import VehicleSpec, generate_vehicles

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    generate_vehicles(str(tmp_path), VehicleSpec.small(seed=4), layout)
    monkeypatch.setenv("FASTREID_DATASETS", str(tmp_path))
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(repo, config))
    cfg.merge_from_list(
        [
            "MODEL.DEVICE",
            "cpu",
            "INPUT.SIZE_TRAIN",
            [32, 32],
            "INPUT.SIZE_TEST",
            [32, 32],
            "DATALOADER.NUM_WORKERS",
            0,
            "DATALOADER.NUM_INSTANCE",
            2,
            "SOLVER.IMS_PER_BATCH",
            8,
            "TEST.IMS_PER_BATCH",
            8,
        ]
    )
    batch = next(iter(build_reid_train_loader(cfg)))
    assert batch["images"].shape == (8, 3, 32, 32)
    sizes = []
    for name in cfg.DATASETS.TESTS:
        loader, num_query = build_reid_test_loader(cfg, name)
        sizes.append((num_query, len(loader.dataset)))
        assert 0 < num_query < len(loader.dataset)
    if len(sizes) == 3:  # small, medium, large: nested, growing
        assert sizes[0][1] < sizes[1][1] < sizes[2][1]


@pytest.mark.slow
def test_temporaries_of_a_killed_generator_are_removed_next_time(tmp_path):
    """kill -9 mid-generation leaves ``.<name>.partial-<pid>-*``; the next run removes it, and only it."""
    import signal
    import subprocess
    import sys

    code = (
        "import time\n"
        "from fastreid.data.synthetic.tree import generated_tree\n"
        f"with generated_tree({str(tmp_path / 'Market-1501-v15.09.15')!r}, generator='t', what='test') as w:\n"
        "    open(w.path + '/half.jpg', 'wb').write(b'x')\n"
        "    print('writing', flush=True)\n"
        "    time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "writing"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    left = [n for n in os.listdir(tmp_path) if ".partial-" in n]
    assert len(left) == 1 and left[0].startswith(f".Market-1501-v15.09.15.partial-{proc.pid}-")
    live = tmp_path / f".Market-1501-v15.09.15.partial-{os.getpid()}-live"  # a writer still running
    live.mkdir()
    user = tmp_path / ".Market-1501-v15.09.15.partial-notapid"  # not the generator's naming
    user.mkdir()
    generate_market1501(str(tmp_path), SyntheticSpec.small(seed=1))
    remaining = sorted(n for n in os.listdir(tmp_path) if ".partial-" in n)
    assert remaining == sorted([live.name, user.name])


def _mean_rgb(folder: str) -> list[float]:
    import numpy as np
    from PIL import Image

    names = sorted(os.listdir(folder))[:40]
    return np.mean(
        [np.asarray(Image.open(os.path.join(folder, n)), np.float64).mean(axis=(0, 1)) for n in names], 0
    )


def test_domain_b_is_a_dukemtmc_reid_of_another_look(small_set, tmp_path, capsys):
    from fastreid.data.datasets import DukeMTMC
    from fastreid.data.synthetic.persons import generate_dukemtmc

    spec = SyntheticSpec.small(seed=3)
    out = generate_dukemtmc(str(tmp_path / "b"), spec)
    assert os.path.basename(out) == "DukeMTMC-reID" and read_marker(out)["what"] == "synthetic DukeMTMC-reID"
    duke_name = re.compile(r"^(-1|\d{4})_c[1-8]_f\d{7}(_\d{2})?\.jpg$")
    for d in ("bounding_box_train", "bounding_box_test", "query"):
        names = os.listdir(os.path.join(out, d))
        assert names and all(duke_name.match(n) for n in names), names[:3]
    ds = DukeMTMC(root=str(tmp_path / "b"))
    assert ds.num_train_pids == spec.num_train_ids and len({p for _, p, _ in ds.query}) == spec.num_test_ids
    assert max(c for _, _, c in ds.gallery + ds.query) >= 6  # cameras 7 and 8: Market-1501 has 6
    # another look: warm light (red over blue), where domain A's scenes are evenly lit
    r, _, b = _mean_rgb(os.path.join(out, "bounding_box_train"))
    ra, _, ba = _mean_rgb(os.path.join(small_set[1], "bounding_box_train"))
    assert r / b > 1.3 * (ra / ba), (r / b, ra / ba)
    assert _digest(generate_dukemtmc(str(tmp_path / "again"), spec)) == _digest(out)
    assert main(["--root", str(tmp_path / "cli"), "--small", "--domain", "B"]) == 0
    assert "DukeMTMC-reID" in capsys.readouterr().out
