"""``make demo`` as a user meets it: a run killed hard (SIGKILL to make and its training, as a power
cut) and the same command run again resumes it, re-training the iterations after its last
checkpoint; Ctrl-C (SIGINT to the terminal's process group) stops it with a checkpoint and prints
the command that resumes it, which is run as printed. The run ends with the unbroken run's weights,
its metrics.json holds each iteration's values once (the unbroken run's where they are
deterministic) and its report draws each series strictly increasing in iteration, listing each
evaluation once. Every ``make demo-*`` target runs the same tools/demo.py (``make -n``)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from fastreid.engine.run_dir import choose_run_folder
from fastreid.report import load_run

REPO = Path(__file__).resolve().parents[2]
MAKE = shutil.which("make")
needs_make = pytest.mark.skipif(MAKE is None, reason="make is not installed")

# configs/Demo/bagtricks_demo.yml made tiny: 2 epochs of 8 iterations at 64x32, a checkpoint and an
# evaluation after each epoch, every iteration logged
TINY = ("INPUT.SIZE_TRAIN [64,32] INPUT.SIZE_TEST [64,32] SOLVER.IMS_PER_BATCH 8 SOLVER.MAX_EPOCH 2 "
        "SOLVER.STEPS [1] SOLVER.WARMUP_ITERS 3 SOLVER.CHECKPOINT_PERIOD 1 SOLVER.LOG_PERIOD 1 "
        "TEST.EVAL_PERIOD 1 TEST.IMS_PER_BATCH 32")  # fmt: skip
# values that depend on the machine's speed, not on the training
TIMING = {"time", "data_time", "eta_seconds"}


def _demo_module():
    # tools/demo.py by its path: "import demo" could find upstream's demo/ folder at the root instead
    spec = importlib.util.spec_from_file_location("fastreid_tools_demo", REPO / "tools" / "demo.py")
    assert spec is not None and spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = demo  # its dataclasses look their module up there
    spec.loader.exec_module(demo)
    return demo


@needs_make
def test_every_demo_target_runs_tools_demo_with_its_family():
    demo = _demo_module()
    makefile = (REPO / "Makefile").read_text()
    targets = sorted(set(re.findall(r"^(demo(?:-\w+)?):", makefile, re.M)))
    assert len(targets) == len(demo.DEMOS) == 8, targets
    for target in targets:
        dry = subprocess.run([MAKE, "-n", "-o", "venv", target, "DEMO_OPTS=K V"], cwd=REPO, capture_output=True,
                             text=True, timeout=30)  # fmt: skip
        assert dry.returncode == 0, dry.stderr
        (line,) = [x for x in dry.stdout.splitlines() if "tools/demo.py" in x]
        words = shlex.split(line)
        family = "reid" if target == "demo" else target.split("-", 1)[1]
        assert f"FASTREID_MAKE_GOAL={target}" in words and words[-2:] == ["K", "V"], line
        assert words[words.index("--family") + 1] == family and family in demo.DEMOS, line


def test_the_distillation_student_learns_from_its_own_run_folders_teacher(tmp_path):
    """make demo-distill's two stages (run here without training them: tests/distill trains both
    configs): each in its sub-folder of the run folder, the student pointed at that teacher."""
    demo = _demo_module()
    args = demo.parse_args(["--family", "distill", "--root", "d", "K", "V"])
    run = str(tmp_path / "demo_distill")
    teacher, student = (demo.stage_argv(args, stage, run, True) for stage in demo.DEMOS["distill"].stages)
    assert (
        teacher[-2:] == ["OUTPUT_DIR", os.path.join(run, "teacher")]
        and "--resume" in teacher
        and "K" in teacher
    )
    assert student[-2:] == ["OUTPUT_DIR", os.path.join(run, "student")]
    config = student[student.index("KD.MODEL_CONFIG") + 1]
    weights = student[student.index("KD.MODEL_WEIGHTS") + 1]
    source = os.path.join(run, "teacher")
    assert config == f"({os.path.join(source, 'config.yaml')!r},)"
    assert weights == f"({os.path.join(source, 'model_final.pth')!r},)"


def test_the_adapted_model_starts_from_its_own_run_folders_source_model(tmp_path):
    """make demo-uda's three stages (trained by tests/uda/test_demo.py): each in its sub-folder, the
    adaptation from that run's source model, the others from their configs' weights."""
    demo = _demo_module()
    args = demo.parse_args(["--family", "uda", "--root", "d", "SEED", "1"])
    run = str(tmp_path / "demo_uda")
    source, adapted, supervised = (demo.stage_argv(args, s, run, False) for s in demo.DEMOS["uda"].stages)
    assert [a[-1] for a in (source, adapted, supervised)] == [
        os.path.join(run, f) for f in ("source", "adapted", "supervised")
    ]
    assert adapted[adapted.index("MODEL.WEIGHTS") + 1] == os.path.join(run, "source", "model_final.pth")
    assert "MODEL.WEIGHTS" not in source and "MODEL.WEIGHTS" not in supervised
    assert all(a[-4:-2] == ["SEED", "1"] for a in (source, adapted, supervised))


def _fake_venv(tmp_path: Path) -> Path:
    """A VENV for the Makefile whose python is this interpreter, installed (stamp newer than
    pyproject.toml): make runs the demo without creating a virtual environment."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    python.chmod(0o755)
    (venv / ".installed").touch()
    return venv


def _wait_for_iteration(metrics: Path, iteration: int, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        if metrics.is_file():
            lines = [json.loads(x) for x in metrics.read_text().splitlines() if x.endswith("}")]
            if any(line["iteration"] >= iteration for line in lines):
                return
        time.sleep(0.05)
    raise TimeoutError(f"iteration {iteration} not reached")


def _deterministic(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING} for r in records]


def _state(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)["model"]


@pytest.fixture(scope="module")
def unbroken(synthetic_market_root, tmp_path_factory, one_torch_thread):
    """The demo run with nothing in its way (in this process; one torch thread, as the runs below)."""
    out = tmp_path_factory.mktemp("unbroken") / "demo"
    old = os.environ.get("FASTREID_DATASETS")
    try:
        code = _demo_module().main(["--root", synthetic_market_root, "--output", str(out), "--num-pictures", "1",
                                    *shlex.split(TINY)])  # fmt: skip
    finally:
        os.environ.pop("FASTREID_DATASETS", None) if old is None else os.environ.update(FASTREID_DATASETS=old)
    assert code == 0
    return out


@needs_make
@pytest.mark.slow
@pytest.mark.skipif(os.name == "nt", reason="POSIX process groups and signals")
def test_make_demo_killed_then_interrupted_resumes_to_the_unbroken_run(
    synthetic_market_root, tmp_path, unbroken
):
    """Three make processes (~10 s of CPU each: the import of torch and a few iterations); the
    kill, the resume after it, the stop and the printed command each need their own."""
    out = tmp_path / "demo"
    command = [MAKE, "demo", f"VENV={_fake_venv(tmp_path)}", f"DATA_ROOT={synthetic_market_root}", f"DEMO_OUT={out}",
               f"DEMO_OPTS=--num-pictures 1 {TINY}"]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    metrics = out / "metrics.json"

    def start() -> subprocess.Popen:
        return subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)  # fmt: skip

    # 1. killed hard after the checkpoint and evaluation of epoch 1 (iteration 8), at iteration 11
    proc = start()
    _wait_for_iteration(metrics, 10, proc)
    os.killpg(proc.pid, signal.SIGKILL)
    stdout, _ = proc.communicate(timeout=60)
    assert "Starting a new run in" in stdout
    assert (out / "last_checkpoint").read_text() == "model_0000.pth"

    # 2. the same command resumes it; Ctrl-C at iteration 13 stops it with a checkpoint
    proc = start()
    _wait_for_iteration(metrics, 12, proc)
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert f"Resuming the interrupted run in {out}" in stdout, stdout[-2000:]
    assert "Resuming after iteration 8" in stdout
    hint = [line for line in stderr.splitlines() if "Resume with: " in line]
    assert hint and "SIGINT stopped training" in hint[-1], stderr[-3000:]
    printed = hint[-1].split("Resume with: ", 1)[1]
    assert shlex.split(printed) == ["make", *command[1:]], printed

    # 3. the printed command finishes the run
    done = subprocess.run(printed, shell=True, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"Resuming the interrupted run in {out}" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == f"Report: {out / 'report.html'}"

    a, b = _state(unbroken / "model_final.pth"), _state(out / "model_final.pth")
    assert [k for k in a if not torch.equal(a[k], b[k])] == []
    # metrics.json: what the killed run wrote after its checkpoint is gone, the evaluation it ran
    # again is there once; the deterministic values are the unbroken run's
    lines = [json.loads(x) for x in metrics.read_text().splitlines()]
    reference = [json.loads(x) for x in (unbroken / "metrics.json").read_text().splitlines()]
    assert _deterministic(lines) == _deterministic(reference)
    # the report's series: one point per iteration, increasing, the unbroken run's values
    run, ref = load_run(str(out)), load_run(str(unbroken))
    iterations = [s["iteration"] for s in run.scalars]
    assert iterations == sorted(set(iterations)) == list(range(16))
    assert [e["iteration"] for e in run.evaluations] == [7, 15]
    assert _deterministic(run.scalars) == _deterministic(ref.scalars)
    assert run.evaluations == ref.evaluations
    # a finished run is kept: the next run goes beside it
    after = choose_run_folder(str(out))
    assert not after.resume and after.path.startswith(f"{out}-") and "finished run" in after.line
