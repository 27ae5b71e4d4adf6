"""fastreid-tune: the search space file, and a real search on Ray Tune over the synthetic data (a
planted bad learning rate loses; Ctrl-C, then the command it prints finishes the search without
repeating finished trials, a trial it continued ending with the weights of the same values trained
without interruption)."""

from __future__ import annotations

import csv
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import yaml

from fastreid.cli.train import run as train_run
from fastreid.config import get_cfg
from fastreid.data.synthetic.persons import SyntheticSpec, generate_market1501
from fastreid.tune.space import SearchSpaceError, load_search_space
from fastreid.utils.ray_cluster import init_ray

REPO = Path(__file__).resolve().parents[2]
TUNE_NET = REPO / "tools" / "tune_net.py"

TINY = f"""\
_BASE_: {REPO / "configs" / "Base-bagtricks.yml"}
MODEL:
  DEVICE: cpu
  BACKBONE: {{DEPTH: 18x, FEAT_DIM: 512, PRETRAIN: False}}
INPUT: {{SIZE_TRAIN: [64, 32], SIZE_TEST: [64, 32]}}
DATALOADER: {{NUM_WORKERS: 0, NUM_INSTANCE: 4}}
SOLVER: {{OPT: Adam, IMS_PER_BATCH: 16, MAX_EPOCH: 2, WARMUP_ITERS: 5, STEPS: [100], LOG_PERIOD: 10,
          AMP: {{ENABLED: False}}}}
TEST: {{EVAL_PERIOD: 1, IMS_PER_BATCH: 64, REPORT: False}}  # the run report: not what is tested here
"""


def _space(tmp_path, text: str) -> str:
    path = tmp_path / "space.yml"
    path.write_text(text)
    return str(path)


# ------------------------------------------------------------------------------ the search space


def test_space_file_forms_and_conditional_keys(tmp_path):
    space = load_search_space(
        _space(
            tmp_path,
            "SOLVER.BASE_LR: {loguniform: [1.0e-5, 1.0e-2]}\n"
            "MODEL.LOSSES.TRI.MARGIN: {quniform: [0.0, 0.6, 0.1]}\n"
            "DATALOADER.NUM_INSTANCE: {choice: [2, 4, 8]}\n"
            "INPUT.REA.ENABLED: {choice: [true, false]}\n"
            "INPUT.REA.PROB: {uniform: [0.2, 0.8], when: {INPUT.REA.ENABLED: true}}\n",
        )
    )
    cfg = get_cfg()
    space.check_against(cfg)
    assert space.keys == [
        "SOLVER.BASE_LR",
        "MODEL.LOSSES.TRI.MARGIN",
        "DATALOADER.NUM_INSTANCE",
        "INPUT.REA.ENABLED",
        "INPUT.REA.PROB",
    ]
    params = {"SOLVER.BASE_LR": 1e-4, "MODEL.LOSSES.TRI.MARGIN": 0.3, "DATALOADER.NUM_INSTANCE": 8,
              "INPUT.REA.ENABLED": False, "INPUT.REA.PROB": 0.7}  # fmt: skip
    applied = space.apply(cfg, params)
    assert "INPUT.REA.PROB" not in applied and cfg.INPUT.REA.PROB == get_cfg().INPUT.REA.PROB
    assert cfg.SOLVER.BASE_LR == 1e-4 and cfg.DATALOADER.NUM_INSTANCE == 8
    cfg = get_cfg()
    space.apply(cfg, {**params, "INPUT.REA.ENABLED": True})
    assert cfg.INPUT.REA.ENABLED and cfg.INPUT.REA.PROB == 0.7


@pytest.mark.parametrize(
    "text, needle",
    [
        ("SOLVER.BASE_LRR: {uniform: [0.1, 0.2]}\n", "did you mean SOLVER.BASE_LR"),
        ("SOLVER.BASE_LR: {unifrom: [0.1, 0.2]}\n", "did you mean uniform"),
        ("SOLVER.BASE_LR: {uniform: [0.2, 0.1]}\n", "low < high"),
        ("SOLVER.BASE_LR: {loguniform: [0, 0.1]}\n", "positive bounds"),
        ("SOLVER.BASE_LR: 0.1\n", "expected a mapping"),
        ("SOLVER.IMS_PER_BATCH: {choice: [32, large]}\n", "SOLVER.IMS_PER_BATCH"),
        (
            "INPUT.REA.PROB: {uniform: [0.1, 0.2], when: {INPUT.REA.ENABLD: true}}\n",
            "did you mean INPUT.REA.ENABLED",
        ),
        ("- 1\n", "expected a mapping of config keys"),
    ],
)
def test_a_bad_space_is_one_clear_error_before_any_trial(tmp_path, text, needle):
    with pytest.raises(SearchSpaceError, match=needle.replace(".", r"\.")):
        load_search_space(_space(tmp_path, text)).check_against(get_cfg())


def test_without_ray_the_command_names_the_extra(tmp_path, monkeypatch, capsys):
    from fastreid.cli.tune import run

    monkeypatch.setitem(sys.modules, "ray", None)  # what an interpreter without the extra has
    monkeypatch.chdir(tmp_path)
    assert run(["--config-file", str(REPO / "configs" / "Base-bagtricks.yml"), "--space", "x.yml"]) == 1
    assert 'pip install "fastreid[tune]"' in capsys.readouterr().err.strip().splitlines()[-1]


def test_ray_workers_get_the_environment_on_a_local_cluster_and_a_running_one(monkeypatch):
    # a cluster started here: its raylet (and so every worker) inherits this process's environment
    # while ray.init runs, and no runtime env (which would make Ray start each actor through its
    # runtime-env setup); a running cluster (its own settings, niceness included): the job's
    # runtime env carries the variables. A cluster started here runs its workers (the trials, the
    # replicas) at this process's priority, not at Ray's nice 15 (starved by any other busy
    # program: a search beside one took 5x as long), unless the user set Ray's variable.
    calls = []

    def init(**kwargs):
        calls.append(
            (kwargs, *(os.environ.get(k) for k in ("FASTREID_RESUME_X", "PYTHONPATH", "RAY_worker_niceness")))
        )

    monkeypatch.setenv("PYTHONPATH", "/code")
    monkeypatch.delenv("FASTREID_RESUME_X", raising=False)
    monkeypatch.delenv("FASTREID_DATASETS", raising=False)
    monkeypatch.delenv("RAY_worker_niceness", raising=False)
    fake_ray = SimpleNamespace(init=init)
    init_ray(fake_ray, None, 3, {"FASTREID_RESUME_X": "again"})
    ((kwargs, during, path, nice),) = calls
    assert during == "again" and path == "/code" and "runtime_env" not in kwargs and kwargs["num_cpus"] == 3
    assert nice == "0"
    assert "FASTREID_RESUME_X" not in os.environ and "RAY_worker_niceness" not in os.environ  # put back
    calls.clear()
    monkeypatch.setenv("RAY_worker_niceness", "10")
    init_ray(fake_ray, None, 3)
    assert calls[0][3] == "10"
    calls.clear()
    init_ray(fake_ray, "ray://head:10001", 3, {"FASTREID_RESUME_X": "again"})
    ((kwargs, during, _, _),) = calls
    assert during is None and kwargs["address"] == "ray://head:10001"
    assert kwargs["runtime_env"] == {"env_vars": {"PYTHONPATH": "/code", "FASTREID_RESUME_X": "again"}}


# ------------------------------------------------------------------------------- real searches

ray = pytest.importorskip("ray", reason="the 'tune' extra is not installed")


def test_the_report_hook_reports_each_evaluation_once_with_the_checkpoint_before_it(tmp_path, monkeypatch):
    # in this process, with Tune's report replaced: the hook the trials run inside Ray (where no
    # coverage is counted) reports the evaluation's metrics, its count and the next iteration, with a
    # checkpoint folder holding the trainer's snapshot and its last_checkpoint, deleted afterwards;
    # a second call at the same iteration, or one without the metric, reports nothing
    from ray import tune

    from fastreid.tune.trainer import TUNE_CHECKPOINT, TuneReportHook

    reports = []

    def report(metrics, checkpoint):
        files = {p.name: p.read_bytes() for p in Path(checkpoint.path).iterdir()}
        reports.append((metrics, files, checkpoint.path))

    monkeypatch.setattr(tune, "report", report)
    latest = {"mAP": (41.5, 9), "Rank-1": (60.0, 9), "loss_cls": (2.0, 9), "lr": (0.1, 9)}
    written = []

    class Checkpointer:
        def snapshot(self, iteration):
            return {"iteration": iteration}

        def write(self, path, state):
            written.append(state)
            Path(path).write_bytes(repr(state).encode())

    hook = TuneReportHook(str(tmp_path / "run"), "mAP")
    hook.trainer = SimpleNamespace(
        iter=9, storage=SimpleNamespace(latest=lambda: latest), checkpointer=Checkpointer()
    )
    hook.after_epoch()
    hook.after_train()  # the same iteration: reported already
    ((metrics, files, folder),) = reports
    assert metrics == {"mAP": 41.5, "Rank-1": 60.0, "iteration": 10, "evaluations": 1}
    assert files == {
        f"{TUNE_CHECKPOINT}.pth": repr({"iteration": 9}).encode(),
        "last_checkpoint": f"{TUNE_CHECKPOINT}.pth".encode(),
    }
    assert not os.path.exists(folder) and os.listdir(tmp_path / "run") == []  # Tune's copy is the only one
    state = hook.state_dict()
    again = TuneReportHook(str(tmp_path / "run"), "mAP")
    again.load_state_dict(state)  # a resumed trial continues the count
    again.trainer = SimpleNamespace(
        iter=19, storage=SimpleNamespace(latest=lambda: {"mAP": (50.0, 19)}), checkpointer=Checkpointer()
    )
    again.after_epoch()
    assert reports[-1][0] == {"mAP": 50.0, "iteration": 20, "evaluations": 2}
    again.trainer.iter = 29  # no evaluation at this iteration: nothing to report
    again.after_epoch()
    assert len(reports) == 2 and written == [{"iteration": 9}, {"iteration": 19}]


@pytest.fixture(scope="module")
def tune_data(tmp_path_factory) -> str:
    """A synthetic Market-1501 large enough for two epochs to separate a good learning rate from
    a bad one (40 training identities, 30 test identities)."""
    root = tmp_path_factory.mktemp("tune_data")
    spec = SyntheticSpec(num_train_ids=40, num_test_ids=30, min_images=6, max_images=10, max_query_per_id=2,
                         num_distractors=20, num_junk=5, seed=11)  # fmt: skip
    generate_market1501(str(root), spec)
    return str(root)


def _command(tmp_path, data_root, *extra):
    config = tmp_path / "tiny.yml"
    config.write_text(TINY)
    space = _space(tmp_path, "SOLVER.BASE_LR: {grid: [1.0e-9, 1.0e-3]}\n")  # 1e-9: nothing is learned
    cmd = [sys.executable, str(TUNE_NET), "--config-file", str(config), "--space", space, "--output",
           str(tmp_path / "tune"), "--name", "lr", *extra]  # fmt: skip
    env = {**os.environ, "FASTREID_DATASETS": data_root, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1",
           "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}  # fmt: skip
    return cmd, env


def _trials(folder: Path) -> list[dict]:
    with open(folder / "trials.csv", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_an_interrupted_search_resumes_and_finds_the_better_learning_rate(tmp_path, tune_data, run_tool):
    # The one real search of the suite (a Ray cluster starts twice: ~1 minute on 2 cores; a smaller
    # search cannot show both a finished trial kept across Ctrl-C and a planted bad learning rate
    # losing): a grid of two learning rates, one trial at a time; Ctrl-C once the first trial has
    # finished, then --resume finishes the search without training that trial again.
    cmd, env = _command(
        tmp_path, tune_data, "--num-samples", "1", "--scheduler", "fifo", "--max-concurrent", "1"
    )
    folder = tmp_path / "tune" / "lr"
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    deadline = time.time() + 600
    finished: list[Path] = []
    try:
        while time.time() < deadline and proc.poll() is None:
            # a trial is finished when its result file holds its 2nd (last) evaluation
            finished = [
                p for p in folder.glob("run_trial_*/result.json") if len(p.read_text().splitlines()) >= 2
            ]
            if finished:
                break
            time.sleep(0.5)
        assert finished, "no trial finished in time"
        proc.send_signal(signal.SIGINT)  # Ctrl-C: Tune saves the experiment's state and stops
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    done_before = {p.parent.name: p.read_text() for p in finished}
    assert proc.returncode != 0 and not (folder / "best_config.yaml").exists(), out[-2000:]
    printed = [line for line in out.splitlines() if "Resume with: " in line]
    assert printed, out[-3000:]
    command = printed[-1].split("Resume with: ", 1)[1]
    assert shlex.split(command) == [cmd[0], cmd[1], "--resume", *cmd[2:]], command

    again = subprocess.run(command, shell=True, capture_output=True, text=True, env=env, timeout=900)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    trials = _trials(folder)
    assert len(trials) == 2 and all(t["error"] == "" for t in trials)
    for name, text in done_before.items():  # finished trials did not train again
        assert (folder / name / "result.json").read_text() == text, name
    results = [
        json.loads(line)
        for p in folder.glob("run_trial_*/result.json")
        for line in p.read_text().splitlines()
    ]
    # each trial evaluated after each of its 2 epochs and reported both evaluations once
    assert sorted(r["evaluations"] for r in results) == [1, 1, 2, 2]
    assert all(int(t["evaluations"]) == 2 for t in trials)

    # the planted bad learning rate lost
    best = yaml.safe_load((folder / "best_config.yaml").read_text())
    assert best["SOLVER"]["BASE_LR"] == pytest.approx(1e-3)
    by_lr = {float(t["SOLVER.BASE_LR"]): float(t["mAP"]) for t in trials}
    assert set(by_lr) == {1e-9, 1e-3} and by_lr[1e-3] > by_lr[1e-9] + 5, by_lr
    assert (folder / "mAP_vs_SOLVER.BASE_LR.png").stat().st_size > 0
    # the best config trains as it is
    assert "the best of 2 trials" in (folder / "best_config.yaml").read_text().splitlines()[0]
    # each trial's run is in its folder of the search, with one copy of the checkpoint Tune resumes
    # from (Tune's); no copy in the run folder, none left in a temporary folder
    for trial in folder.glob("run_trial_*"):
        assert (trial / "run" / "model_final.pth").is_file(), sorted(trial.rglob("*"))
        assert len(list(trial.glob("checkpoint_*/model_tune.pth"))) == 1, sorted(trial.rglob("*"))
        assert not list((trial / "run").glob("*tune*")), sorted((trial / "run").iterdir())

    # a trial the Ctrl-C stopped continued from its checkpoint: its weights are those of its values
    # trained without interruption (the same seed and data), here by fastreid-train in this process
    for trial in folder.glob("run_trial_*"):
        if trial.name in done_before:
            continue
        plain = tmp_path / f"plain_{trial.name}"
        done = run_tool(train_run, "--config-file", trial / "run" / "config.yaml", "OUTPUT_DIR", plain,
                        env={"FASTREID_DATASETS": tune_data, "OMP_NUM_THREADS": "1"})  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        resumed, unbroken = (
            torch.load(f / "model_final.pth", weights_only=True)["model"] for f in (trial / "run", plain)
        )
        assert [k for k in unbroken if not torch.equal(unbroken[k], resumed[k])] == [], trial.name


def test_resume_without_a_search_is_a_clear_error(tmp_path, tune_data, monkeypatch, capsys):
    from fastreid.cli.tune import run

    cmd, env = _command(tmp_path, tune_data, "--resume")
    monkeypatch.setenv("FASTREID_DATASETS", tune_data)
    assert run(cmd[2:]) == 1
    assert "Nothing to resume" in capsys.readouterr().err.strip().splitlines()[-1]
