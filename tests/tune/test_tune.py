"""fastreid-tune: the search space file, and real searches on Ray Tune over the synthetic data (a
planted bad learning rate loses; Ctrl-C, then the command it prints finishes the search without
repeating finished trials, each trial ending with the weights of the unbroken search's trial of the
same values)."""

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

import pytest
import torch
import yaml

from fastreid.config import get_cfg
from fastreid.data.synthetic.persons import SyntheticSpec, generate_market1501
from fastreid.tune.space import SearchSpaceError, load_search_space

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
TEST: {{EVAL_PERIOD: 1, IMS_PER_BATCH: 64}}
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


def test_without_ray_the_command_names_the_extra(tmp_path):
    script = (
        "import sys; sys.modules['ray'] = None\n"
        "from fastreid.cli.tune import run\n"
        f"sys.exit(run(['--config-file', {str(REPO / 'configs/Base-bagtricks.yml')!r}, '--space', 'x.yml']))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert 'pip install "fastreid[tune]"' in proc.stderr.strip().splitlines()[-1]


# ------------------------------------------------------------------------------- real searches

ray = pytest.importorskip("ray", reason="the 'tune' extra is not installed")


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
    space = _space(tmp_path, "SOLVER.BASE_LR: {choice: [1.0e-9, 1.0e-3]}\n")  # 1e-9: nothing is learned
    cmd = [sys.executable, str(TUNE_NET), "--config-file", str(config), "--space", space, "--output",
           str(tmp_path / "tune"), "--name", "lr", "--searcher", "random", *extra]  # fmt: skip
    env = {**os.environ, "FASTREID_DATASETS": data_root, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1",
           "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}  # fmt: skip
    return cmd, env


def _trials(folder: Path) -> list[dict]:
    with open(folder / "trials.csv", encoding="utf-8") as f:
        return list(csv.DictReader(f))


SEARCH = ("--num-samples", "4", "--scheduler", "fifo", "--seed", "3")


@pytest.fixture(scope="module")
def unbroken_search(tmp_path_factory, tune_data) -> Path:
    """The folder of a search of 4 trials (2 learning rates) that nothing interrupted."""
    tmp_path = tmp_path_factory.mktemp("unbroken_search")
    cmd, env = _command(tmp_path, tune_data, *SEARCH)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return tmp_path / "tune" / "lr"


def _final_weights(folder: Path) -> dict[float, list[dict]]:
    """Each trial's final weights, by its learning rate."""
    found: dict[float, list[dict]] = {}
    for trial in folder.glob("run_trial_*"):
        lr = yaml.safe_load((trial / "run" / "config.yaml").read_text())["SOLVER"]["BASE_LR"]
        state = torch.load(trial / "run" / "model_final.pth", map_location="cpu", weights_only=True)["model"]
        found.setdefault(float(lr), []).append(state)
    return found


@pytest.mark.slow
def test_search_finds_the_better_learning_rate(unbroken_search):
    folder = unbroken_search
    best = yaml.safe_load((folder / "best_config.yaml").read_text())
    assert best["SOLVER"]["BASE_LR"] == pytest.approx(1e-3)
    trials = _trials(folder)
    assert len(trials) == 4 and all(t["error"] == "" for t in trials)
    by_lr = {}
    for t in trials:
        by_lr.setdefault(float(t["SOLVER.BASE_LR"]), []).append(float(t["mAP"]))
    assert set(by_lr) == {1e-9, 1e-3}, by_lr  # the random searcher drew both (seed 3)
    assert min(by_lr[1e-3]) > max(by_lr[1e-9]) + 5, by_lr
    assert (folder / "mAP_vs_SOLVER.BASE_LR.png").stat().st_size > 0
    # each trial evaluated after each of its 2 epochs and reported both evaluations
    assert all(int(t["evaluations"]) == 2 for t in trials)
    # the best config trains as it is
    assert "the best of 4 trials" in (folder / "best_config.yaml").read_text().splitlines()[0]
    # each trial's run is in its folder of the search, with one copy of the checkpoint Tune resumes
    # from (Tune's); no copy in the run folder, none left in a temporary folder
    for trial in folder.glob("run_trial_*"):
        assert (trial / "run" / "model_final.pth").is_file(), sorted(trial.rglob("*"))
        assert len(list(trial.glob("checkpoint_*/model_tune.pth"))) == 1, sorted(trial.rglob("*"))
        assert not list((trial / "run").glob("*tune*")), sorted((trial / "run").iterdir())


@pytest.mark.slow
def test_an_interrupted_search_resumes_without_repeating_finished_trials(
    tmp_path, tune_data, unbroken_search
):
    cmd, env = _command(tmp_path, tune_data, *SEARCH, "--max-concurrent", "1")
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
            time.sleep(1)
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
    assert len(trials) == 4 and all(t["error"] == "" for t in trials)
    for name, text in done_before.items():  # finished trials did not train again
        assert (folder / name / "result.json").read_text() == text, name
    results = [
        json.loads(line)
        for p in folder.glob("run_trial_*/result.json")
        for line in p.read_text().splitlines()
    ]
    assert sorted(r["evaluations"] for r in results) == [1, 1, 1, 1, 2, 2, 2, 2]
    # the trial stopped by Ctrl-C continued from its checkpoint: every trial ends as the unbroken
    # search's trials of its learning rate (the same seed and data: the same weights)
    reference = _final_weights(unbroken_search)
    for lr, states in _final_weights(folder).items():
        for state in states:
            expected = reference[lr][0]
            assert [k for k in expected if not torch.equal(expected[k], state[k])] == [], lr


def test_resume_without_a_search_is_a_clear_error(tmp_path, tune_data):
    cmd, env = _command(tmp_path, tune_data, "--resume")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 1
    assert "Nothing to resume" in proc.stderr.strip().splitlines()[-1]
