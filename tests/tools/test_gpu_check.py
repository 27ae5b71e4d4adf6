"""``make gpu-check`` (tools/dev/gpu_check.py) where there is no CUDA: the CPU reference runs, every
CUDA check is SKIP with its reason, the exit status is 0, and the table and JSON say so. Also the
offline wheel installer (tools/dev/offline_wheels.py) that ``make gpu-check WHEELS=`` uses."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"_dev_{name}", REPO / "tools" / "dev" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


gpu_check = _load("gpu_check")
offline_wheels = _load("offline_wheels")

#: The demo shrunk to seconds: what the CPU reference trains in this test.
TINY = ["INPUT.SIZE_TRAIN", "[64, 32]", "INPUT.SIZE_TEST", "[64, 32]", "SOLVER.IMS_PER_BATCH", "16",
        "SOLVER.WARMUP_ITERS", "2", "TEST.REPORT", "False"]  # fmt: skip


@pytest.fixture
def no_cuda(monkeypatch):
    """This process sees no CUDA, whatever the machine has (the reference trains on the CPU anyway)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.mark.slow
def test_without_cuda_the_reference_runs_and_every_cuda_check_is_skipped(
    tmp_path, synthetic_market_root, no_cuda, capsys
):
    # one real training process (~10 s): the reference is what a CPU machine contributes
    out = tmp_path / "gc"
    code = gpu_check.main(
        ["--out", str(out), "--root", synthetic_market_root, "--epochs", "1", "--demo-opts", *TINY]
    )
    assert code == 0
    report = json.loads((out / "gpu_check.json").read_text())
    rows = {r["id"]: r for r in report["rows"]}
    assert [r["id"] for r in report["rows"]] == [c.id for c in gpu_check.CHECKS]
    ref = rows.pop("ref")
    assert ref["status"] == "PASS", ref
    assert (
        0 <= ref["data"]["rank1"] <= 100 and ref["data"]["epochs"] == 1 and ref["data"]["losses_logged"] > 0
    )
    for row in rows.values():  # no CUDA check can pass (or fail) without CUDA
        assert row["status"] == "SKIP" and row["reason"] == gpu_check.NO_CUDA, row
    assert report["environment"]["torch"] == torch.__version__ and "gpu" not in report["environment"]
    printed = capsys.readouterr().out
    table = (out / "gpu_check.md").read_text()
    for row in report["rows"]:  # one table row per check, on the console and in the Markdown file
        line = next(x for x in table.splitlines() if x.startswith(f"| {row['id']} |"))
        assert line.split(" | ")[2] == row["status"] and line in printed
    assert "1 PASS, 0 FAIL, 13 SKIP" in printed

    # a GPU machine takes this run's reference instead of training its own
    again = tmp_path / "again"
    code = gpu_check.main(["--out", str(again), "--root", synthetic_market_root, "--epochs", "1",
                           "--cpu-reference", str(out / "gpu_check.json"), "--only", "ref"])  # fmt: skip
    row = json.loads((again / "gpu_check.json").read_text())["rows"][0]
    assert code == 0 and row["status"] == "PASS" and row["data"]["rank1"] == ref["data"]["rank1"]
    assert row["data"]["source"] == str(out / "gpu_check.json")

    # a reference of another length is refused, not compared
    code = gpu_check.main(["--out", str(again), "--root", synthetic_market_root, "--epochs", "2",
                           "--cpu-reference", str(out / "gpu_check.json"), "--only", "ref"])  # fmt: skip
    row = json.loads((again / "gpu_check.json").read_text())["rows"][0]
    assert code == 1 and row["status"] == "FAIL" and "trained 1 epochs, this run 2" in row["reason"]


def test_a_failing_check_fails_the_run_and_a_spent_budget_skips_the_rest(
    tmp_path, synthetic_market_root, monkeypatch, no_cuda
):
    def broken(ctx):
        raise gpu_check.CheckFailedError("planted fault", "figure 1")

    def buggy(ctx):
        raise KeyError("not a CheckFailedError: a bug")

    checks = [gpu_check.Check("x", "fails", False, broken), gpu_check.Check("y", "raises", False, buggy),
              gpu_check.Check("z", "needs CUDA", True, broken)]  # fmt: skip
    monkeypatch.setattr(gpu_check, "CHECKS", checks)
    out = tmp_path / "gc"
    assert gpu_check.main(["--out", str(out), "--root", synthetic_market_root]) == 1
    rows = json.loads((out / "gpu_check.json").read_text())["rows"]
    assert [(r["id"], r["status"]) for r in rows] == [("x", "FAIL"), ("y", "FAIL"), ("z", "SKIP")]
    assert rows[0]["reason"] == "planted fault" and rows[0]["figure"] == "figure 1"
    assert rows[1]["reason"].startswith("KeyError") and "Traceback" in rows[1]["data"]["traceback"]

    assert gpu_check.main(["--out", str(out), "--root", synthetic_market_root, "--budget-s", "0"]) == 0
    rows = json.loads((out / "gpu_check.json").read_text())["rows"]
    assert [r["status"] for r in rows] == ["SKIP"] * 3 and "time budget" in rows[0]["reason"]


def _wheel(folder: Path, name: str, version: str = "1.0") -> Path:
    """A minimal pure-Python wheel of project ``name`` holding one module."""
    path = folder / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{name}.py", "VALUE = 42\n")
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        z.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        z.writestr(f"{info}/RECORD", f"{name}.py,,\n{info}/METADATA,,\n{info}/WHEEL,,\n{info}/RECORD,,\n")
    return path


def test_offline_install_takes_only_what_the_python_lacks(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels, "fastreid_gpu_check_probe")  # a project this Python does not have
    _wheel(wheels, "numpy", "0.0.1")  # installed already: must not replace the machine's numpy
    target = tmp_path / "site"
    offline_wheels.main(["install", "--wheels", str(wheels), "--target", str(target)])
    assert (target / "fastreid_gpu_check_probe.py").exists()
    assert not list(target.glob("numpy*"))
    probe = subprocess.run(
        [sys.executable, "-c", "import fastreid_gpu_check_probe as p; print(p.VALUE)"],
        env={**os.environ, "PYTHONPATH": str(target)}, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert probe.stdout.strip() == "42"
    with pytest.raises(SystemExit, match="make wheels"):
        offline_wheels.main(["install", "--wheels", str(tmp_path / "empty"), "--target", str(target)])


def test_the_wheel_list_is_the_package_s_dependencies_without_pytorch():
    reqs = offline_wheels.requirements(["serve", "deploy"])
    names = {offline_wheels.normalise(r.split(">")[0].split("=")[0].split("<")[0]) for r in reqs}
    assert {"fvcore", "faiss-cpu", "fastapi", "uvicorn", "onnxruntime"} <= names
    assert not names & {"torch", "torchvision"}
    with pytest.raises(SystemExit, match="no extra 'nope'"):
        offline_wheels.requirements(["nope"])
