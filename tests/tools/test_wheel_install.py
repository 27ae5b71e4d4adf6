"""``pip install .`` outside a checkout, as a user does it: build the wheel, install it into a
folder, and train with the ``fastreid-train`` it installed, from a folder that is not the checkout,
with upstream's ``--config-file configs/Market1501/bagtricks_R50.yml``.

The wheel is built from a copy of the files a build reads (setuptools writes build/ and
*.egg-info next to the sources), offline and without build isolation (the venv's setuptools).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
MARKET = "configs/Market1501/bagtricks_R50.yml"

# A ResNet-18 on 64x32 images for two iterations, no evaluation: what the tiny tests train.
TINY = [
    "MODEL.DEVICE", "cpu",
    "MODEL.BACKBONE.DEPTH", "18x",
    "MODEL.BACKBONE.FEAT_DIM", "512",
    "MODEL.BACKBONE.PRETRAIN", "False",
    "INPUT.SIZE_TRAIN", "[64, 32]",
    "INPUT.SIZE_TEST", "[64, 32]",
    "INPUT.PADDING.SIZE", "4",
    "DATALOADER.NUM_WORKERS", "0",
    "DATALOADER.NUM_INSTANCE", "4",
    "SOLVER.IMS_PER_BATCH", "8",
    "SOLVER.MAX_ITER", "2",
    "SOLVER.WARMUP_ITERS", "1",
    "SOLVER.CHECKPOINT_PERIOD", "1",
    "SOLVER.LOG_PERIOD", "1",
    "TEST.EVAL_PERIOD", "0",
    "TEST.IMS_PER_BATCH", "32",
]  # fmt: skip


def _pip(*args: str, cwd: Path) -> None:
    env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    pytest.importorskip("setuptools", minversion="64")  # pyproject.toml's build requirement
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    for name in ("fastreid", "configs"):
        shutil.copytree(REPO / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    _pip("wheel", "--no-deps", "--no-build-isolation", "-w", str(out), ".", cwd=source)
    (built,) = out.glob("fastreid-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("target")
    _pip("install", "--no-deps", "--target", str(target), str(wheel), cwd=target)
    return target


def test_the_wheel_holds_every_config_and_the_commands(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        scripts = z.read(entry_points).decode()
    shipped = {
        n[len("fastreid/configs/") :]
        for n in names
        if n.startswith("fastreid/configs/") and n.endswith(".yml")
    }
    in_checkout = {p.relative_to(REPO / "configs").as_posix() for p in (REPO / "configs").rglob("*.yml")}
    assert shipped == in_checkout and "Market1501/bagtricks_R50.yml" in shipped
    assert {"fastreid/configs/__init__.py", "fastreid/cli/train.py", "fastreid/config/locate.py"} <= names
    commands = {line.split(" = ")[0] for line in scripts.splitlines() if " = " in line}
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    with open(REPO / "pyproject.toml", "rb") as f:
        declared = set(tomllib.load(f)["project"]["scripts"])
    assert commands == declared and {"fastreid-train", "fastreid-extract", "fastreid-tune"} <= commands


def test_fastreid_train_outside_the_checkout(installed, synthetic_market_root, tmp_path):
    user_dir = tmp_path / "somewhere_else"
    user_dir.mkdir()
    # no OpenMP wait variable of the caller's: the command's own decision shows in the log
    dropped = {
        "PYTHONPATH",
        "FASTREID_OMP_WAIT_SET",
        "OMP_WAIT_POLICY",
        "GOMP_SPINCOUNT",
        "KMP_BLOCKTIME",
        "KMP_LIBRARY",
    }
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update(PYTHONPATH=str(installed), FASTREID_DATASETS=synthetic_market_root, OMP_NUM_THREADS="1")

    where = subprocess.run(
        [sys.executable, "-c", "import fastreid, fastreid.configs; print(fastreid.__file__)"],
        capture_output=True,
        text=True,
        cwd=user_dir,
        env=env,
        timeout=120,
    )
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()) == installed / "fastreid" / "__init__.py"  # not the checkout's

    command = (
        installed / "Scripts" / "fastreid-train.exe"
        if os.name == "nt"
        else installed / "bin" / "fastreid-train"
    )
    out = user_dir / "logs" / "market"
    proc = subprocess.run(
        [str(command), "--config-file", MARKET, *TINY, "OUTPUT_DIR", str(out)],
        capture_output=True,
        text=True,
        cwd=user_dir,
        env=env,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    shipped = installed / "fastreid" / "configs" / "Market1501" / "bagtricks_R50.yml"
    notice = f"Config file {MARKET} is not in {user_dir}; using the one shipped with fastreid: {shipped}"
    assert proc.stderr.count(notice) == 1
    assert (out / "model_final.pth").is_file()
    log = (out / "log.txt").read_text(encoding="utf-8")
    assert f"Contents of args.config_file={shipped}" in log
    assert (
        "OpenMP wait: PASSIVE, GOMP_SPINCOUNT=3000 (fastreid)" in log
    )  # decided before the console script loaded torch
    saved = (out / "config.yaml").read_text(encoding="utf-8")
    assert "Market1501" in saved and "TripletLoss" in saved  # the config and its _BASE_ were merged
