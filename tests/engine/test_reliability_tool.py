"""tools/train_net.py as a user runs it: checkpoints before evaluation, stop signals that save and
resume bit-identically, kill -9 during writes, one run per folder, a full disk, a finished run
resumed. Each way of starting a training run (tools/train_net.py, fastreid-train, torchrun, the
Windows launcher) is stopped by a signal and the command it prints is run as printed: it continues
to the unbroken run's weights (make demo: tests/tools/test_demo_runs.py).

The runs that are signalled, killed or given a full disk are real processes, and so are the printed
commands of the other launchers, run in a shell. The rest run tools/train_net.py's ``run`` in the
test's process: the runs nobody stops, and a printed ``python tools/train_net.py ...`` command
(checked word for word first; the script only passes its arguments to ``run``)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch

from fastreid.cli import train

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN_NET = os.path.join(REPO, "tools", "train_net.py")
PATCHED = os.path.join(REPO, "train_windows_patched.py")
BAT = os.path.join(REPO, "train_windows_recommended.bat")
BIN = os.path.dirname(sys.executable)

TINY = [
    "MODEL.DEVICE",
    "cpu",
    "MODEL.BACKBONE.DEPTH",
    "18x",
    "MODEL.BACKBONE.FEAT_DIM",
    "512",
    "MODEL.BACKBONE.PRETRAIN",
    "False",
    "INPUT.SIZE_TRAIN",
    "[64,32]",
    "INPUT.SIZE_TEST",
    "[64,32]",
    "DATALOADER.NUM_WORKERS",
    "0",
    "SOLVER.AMP.ENABLED",
    "False",
    "SOLVER.IMS_PER_BATCH",
    "8",
    "SOLVER.WARMUP_ITERS",
    "3",
    "SOLVER.MAX_EPOCH",
    "1",
    "SOLVER.STEPS",
    "[1]",
    "SOLVER.CHECKPOINT_PERIOD",
    "1",
    "SOLVER.LOG_PERIOD",
    "1",
    "TEST.EVAL_PERIOD",
    "0",
    "TEST.IMS_PER_BATCH",
    "32",
    "CUDNN_BENCHMARK",
    "False",
    "TEST.REPORT",  # a fifth of a tiny run's time; the report's own tests write it
    "False",
]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def data_root(synthetic_market_root):
    """The shared synthetic Market-1501 (read-only: the corrupt-image test works on a copy)."""
    return synthetic_market_root


def _env(data_root):
    env = dict(os.environ)
    env.update(FASTREID_DATASETS=str(data_root), OMP_NUM_THREADS="1", PYTHONPATH=REPO)
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")  # the console scripts of this interpreter
    return env


def _command(out, *opts, flags=(), program=(sys.executable, TRAIN_NET)):
    return [
        *program,
        "--config-file",
        os.path.join(REPO, "configs", "Base-bagtricks.yml"),
        *flags,
        *TINY,
        "OUTPUT_DIR",
        str(out),
        *map(str, opts),
    ]


@pytest.fixture
def train_here(run_tool, data_root):
    """``train_here(out, *opts, flags=(), root=data_root)``: the tiny run's command in this process."""

    def call(out, *opts, flags=(), root=None):
        argv = _command(out, *opts, flags=flags)[2:]
        return run_tool(train.run, *argv, env=_here_env(root or data_root), script=TRAIN_NET)

    return call


def _here_env(data_root) -> dict:
    return {"FASTREID_DATASETS": str(data_root), "OMP_NUM_THREADS": "1"}


@pytest.fixture
def run_printed_here(run_tool, data_root):
    """``run_printed_here(command)``: a printed ``python tools/train_net.py ...`` command, its words
    checked, then run in this process (what the script does with them)."""

    def call(command, root=None):
        words = shlex.split(command)
        assert words[:2] == [sys.executable, TRAIN_NET], command
        return run_tool(train.run, *words[2:], env=_here_env(root or data_root), script=TRAIN_NET)

    return call


def start_tool(data_root, out, *opts, flags=(), program=(sys.executable, TRAIN_NET), env=None):
    return subprocess.Popen(
        _command(out, *opts, flags=flags, program=program),
        env={**_env(data_root), **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_iteration(out, iteration, proc, timeout=120):
    """Block until metrics.json (written every iteration with LOG_PERIOD 1) reaches ``iteration``."""
    path = os.path.join(out, "metrics.json")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        if os.path.isfile(path):
            with open(path) as f:
                if any(json.loads(line).get("iteration", -1) >= iteration for line in f if line.strip()):
                    return
        time.sleep(0.05)
    raise TimeoutError(f"iteration {iteration} not reached")


def model_state(path):
    return torch.load(path, map_location="cpu", weights_only=True)["model"]


def assert_same_weights(a, b):
    sa, sb = model_state(a), model_state(b)
    assert sa.keys() == sb.keys()
    different = [k for k in sa if not torch.equal(sa[k], sb[k])]
    assert not different, f"{len(different)} tensors differ, e.g. {different[:3]}"


def saved_mid_epoch(out) -> int:
    """The iteration after which a stopped run saved its last checkpoint: inside the first epoch
    (iterations 0 to 7), not before iteration 2 (the signal came once metrics.json showed it)."""
    saved = (out / "last_checkpoint").read_text()
    assert saved.startswith("model_iter") and (out / saved).is_file()
    stopped_after = torch.load(out / saved, weights_only=True)["trainer"]["iteration"]
    assert 2 <= stopped_after < 7  # mid-epoch
    return stopped_after


def last_line(text):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


def printed_command(stderr):
    """The command after "Resume with: " on the last line that has one (under torchrun, the
    launcher's own report of the stopped worker follows it)."""
    lines = [line for line in stderr.splitlines() if "Resume with: " in line]
    assert lines, stderr[-3000:]
    return lines[-1].split("Resume with: ", 1)[1].strip()


def run_printed(command, data_root, env=None):
    """Run a printed command as a user pastes it into a shell (same folder, same environment)."""
    return subprocess.run(command, shell=True, env={**_env(data_root), **(env or {})}, capture_output=True,
                          text=True, timeout=240, cwd=REPO)  # fmt: skip


@pytest.fixture(scope="module")
def reference_run(data_root, tmp_path_factory):
    """One uninterrupted run (1 epoch of 8 iterations, final evaluation), in this process."""
    out = tmp_path_factory.mktemp("reference")
    saved, threads = dict(os.environ), torch.get_num_threads()
    os.environ.update(_here_env(data_root))
    try:
        assert train.run(_command(out)[2:]) == 0
    finally:
        os.environ.clear()
        os.environ.update(saved)
        torch.set_num_threads(threads)
    return out


def test_final_evaluation_reaches_metrics_json(reference_run):
    lines = [json.loads(line) for line in (reference_run / "metrics.json").read_text().splitlines()]
    evaluations = [line for line in lines if "Rank-1" in line]
    assert len(evaluations) == 1 and evaluations[0]["iteration"] == 7
    assert {"mAP", "metric", "Rank-5"} <= set(evaluations[0])
    assert (reference_run / "model_best.pth").is_file()
    best = torch.load(reference_run / "model_best.pth", weights_only=True)
    assert best["best_metric"] == evaluations[0]["metric"]


# torchrun's command line as typed where the system shows the launcher's (Linux), else the one its
# environment tells (fastreid.utils.resume_hint)
TORCHRUN_SEEN = (
    f"{sys.executable} -m torch.distributed.run --standalone --nproc-per-node 1 -m fastreid.cli.train"
    if os.path.isdir("/proc/self")
    else "torchrun --standalone --nproc-per-node 1 -m fastreid.cli.train"
)
# How each way of starting a run is started, the stop signal it gets and the exit code that signal
# gives (torchrun's: its own), and what its printed command must start with.
FASTREID_TRAIN = os.path.join(BIN, "fastreid-train")
ENTRY_POINTS = {
    "fastreid-train": ((FASTREID_TRAIN,), {}, signal.SIGTERM, 143, "fastreid-train --resume --config-file"),
    "torchrun -m fastreid.cli.train": (
        (sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1",
         "-m", "fastreid.cli.train", "--dist-url", "env://"),
        {},
        signal.SIGTERM,
        None,
        f"{TORCHRUN_SEEN} --resume --dist-url env://",
    ),
    # what train_windows_recommended.bat runs (it sets FASTREID_LAUNCHER to itself first); Ctrl-C
    "Windows launcher": (
        (sys.executable, PATCHED), {"FASTREID_LAUNCHER": BAT}, signal.SIGINT, 130, f"{BAT} --resume --config-file"
    ),
}  # fmt: skip


@pytest.mark.skipif(os.name == "nt", reason="POSIX signals and a POSIX shell")
@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_each_way_of_starting_a_run_prints_the_command_that_resumes_it(
    entry, data_root, reference_run, tmp_path, run_tool
):
    """A stop signal mid-epoch to the process the user started: SIGTERM (a scheduler's; torchrun
    passes it on to its worker), Ctrl-C's SIGINT to the Windows launcher. The run saves and exits
    143 or 130 with the saved checkpoint and the command on its last line (torchrun: with its own
    code, its report after them), and the printed command continues to the unbroken run's weights.
    torchrun's command runs in a shell (its agent and worker are new processes); the others'
    commands, checked word for word, run their entry point in this process
    (fastreid.cli.train.run, what the fastreid-train script calls; the Windows launcher's main).
    The Windows launcher's command is cmd.exe's: here its .bat is replaced by what the .bat runs,
    with the same arguments. (``python tools/train_net.py``'s command, built by the same
    fastreid.utils.resume_hint, is followed by the refusal test below.)"""
    if entry == "fastreid-train" and not os.path.isfile(FASTREID_TRAIN):
        pytest.skip("fastreid-train is not installed next to this interpreter")
    program, env, sig, code, expected = ENTRY_POINTS[entry]
    out = tmp_path / "run"
    proc = start_tool(data_root, out, program=program, env=env)
    wait_for_iteration(out, 2, proc)
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=120)
    torchrun = entry == "torchrun -m fastreid.cli.train"
    assert proc.returncode != 0 if torchrun else proc.returncode == code, stderr
    assert "checkpoint saved to" in stderr, stderr[-3000:]
    if not torchrun:
        assert "Resume with: " in last_line(stderr) and "checkpoint saved to" in last_line(stderr)
    stopped_after = saved_mid_epoch(out)
    command = printed_command(stderr)
    assert command.startswith(expected), command
    assert command.endswith(f"OUTPUT_DIR {out}"), command
    if torchrun:
        resumed = run_printed(command, data_root, env)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
    elif entry == "fastreid-train":
        words = shlex.split(command)
        assert words[0] == "fastreid-train", command
        resumed = run_tool(train.run, *words[1:], env=_here_env(data_root), script=FASTREID_TRAIN)
        assert resumed.returncode == 0, resumed.stderr
    else:
        assert '"' not in command  # nothing cmd.exe would quote: the words split at spaces
        words = command[len(BAT) :].split()
        resumed = run_tool(
            _windows_launcher_main, *words, env={**_here_env(data_root), **env}, script=PATCHED
        )
        assert resumed.returncode == 0, resumed.stderr
    assert f"Resuming after iteration {stopped_after + 1}" in resumed.stdout + resumed.stderr
    assert_same_weights(reference_run / "model_final.pth", out / "model_final.pth")


def _windows_launcher_main(argv: list) -> int:
    """train_windows_patched.py's main in this process (sys.path as it was afterwards: the
    launcher puts the checkout and tools/ first, as in its own process)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("train_windows_patched", PATCHED)
    assert spec is not None and spec.loader is not None
    launcher = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(launcher)
    saved = sys.path[:]
    try:
        return launcher.main(argv)
    finally:
        sys.path[:] = saved


def test_a_new_run_into_a_folder_holding_one_is_refused_and_its_command_finds_it_complete(
    reference_run, train_here, run_printed_here
):
    """The refusal names the command that continues the run in the folder; run as printed, it
    finds the run complete and writes nothing (the weights of the end were written once, the state
    after the final evaluation in its .update)."""
    listing = sorted(os.listdir(reference_run))
    log = (reference_run / "log.txt").read_text()
    assert log.count("Saving checkpoint to") and log.count("model_final.pth\n") == 1, log[-2000:]
    assert (reference_run / "model_final.pth.update").is_file()
    before = (reference_run / "model_final.pth").stat().st_mtime_ns
    again = train_here(reference_run)
    assert again.returncode == 1
    line = last_line(again.stderr)
    assert (
        line.startswith("OutputDirNotEmptyError: OUTPUT_DIR") and len(again.stderr.strip().splitlines()) == 1
    )
    assert sorted(os.listdir(reference_run)) == listing

    command = line.split("continue it with: ", 1)[1]
    assert shlex.split(command) == [sys.executable, TRAIN_NET, "--resume", *_command(reference_run)[2:]], (
        command
    )
    resumed = run_printed_here(command)
    assert resumed.returncode == 0, resumed.stderr
    assert "is complete" in resumed.stdout
    assert (reference_run / "model_final.pth").stat().st_mtime_ns == before
    assert (reference_run / "last_checkpoint").read_text() == "model_final.pth"


def test_evaluation_error_at_the_end_keeps_final_checkpoint(data_root, tmp_path, train_here):
    corrupt = tmp_path / "data"
    shutil.copytree(data_root, corrupt)
    gallery = corrupt / "Market-1501-v15.09.15" / "bounding_box_test"
    victim = next(
        p for p in sorted(gallery.iterdir()) if not p.name.startswith("-1")
    )  # not a dropped junk image
    victim.write_bytes(b"not a jpeg")
    out = tmp_path / "run"
    done = train_here(out, root=corrupt)
    assert done.returncode == 3, done.stderr
    line = last_line(done.stderr)
    assert line.startswith("EvaluationFailedError:") and victim.name in line, line
    assert (out / "last_checkpoint").read_text() == "model_final.pth"
    assert torch.load(out / "model_final.pth", weights_only=True)["iteration"] == 7
    assert "failed" in (out / "log.txt").read_text()

    # the cause fixed, the evaluation the message names (in this process: no second import of torch)
    shutil.copyfile(
        os.path.join(data_root, "Market-1501-v15.09.15", "bounding_box_test", victim.name), victim
    )
    flag, key, weights = re.search(r"evaluate with (--eval-only) (MODEL\.WEIGHTS) (\S+)$", line).groups()
    assert weights == str(out / "model_final.pth")
    assert train_here(out, key, weights, flags=[flag], root=corrupt).returncode == 0


def test_lock_refuses_a_second_run_and_stale_lock_is_taken_over(tmp_path, train_here):
    import socket

    out = tmp_path / "run"
    out.mkdir()
    lock = out / ".fastreid-run.lock"
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # a live run's process
    try:
        lock.write_text(json.dumps({"pid": holder.pid, "host": socket.gethostname(), "started": time.time()}))
        refused = train_here(out, "SOLVER.MAX_ITER", 1)
    finally:
        holder.kill()
        holder.wait()
    assert refused.returncode == 1
    assert f"pid {holder.pid}" in last_line(refused.stderr) and "--break-lock" in last_line(refused.stderr)
    assert sorted(os.listdir(out)) == [".fastreid-run.lock"]  # nothing written

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lock.write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname()}))
    (out / f".model_0000.pth.tmp.{dead.pid}").write_bytes(b"x" * 1000)  # a killed writer's leftover
    taken = train_here(out, "SOLVER.MAX_ITER", 1, "TEST.EVAL_PERIOD", 100)
    assert taken.returncode == 0, taken.stderr
    assert not lock.exists()  # released at the end
    assert not [n for n in os.listdir(out) if ".tmp." in n]


def test_kill_9_during_checkpoint_writes_never_breaks_last_checkpoint(data_root, tmp_path, train_here):
    # ~20 s of CPU: a SIGKILL needs a real process (two of them: a fresh run and a resumed one,
    # each importing torch and training until a kill lands inside a checkpoint write), then the
    # resume in this process
    out = tmp_path / "run"
    # a checkpoint every iteration (timed, at ~0 minutes) gives many writes to land a kill in
    opts = ["SOLVER.MAX_EPOCH", 2, "SOLVER.CHECKPOINT_MINUTES", 0.00001, "SOLVER.CHECKPOINT_KEEP", 1]
    kills = 0
    for attempt in range(2):  # a kill in a fresh run and one in a resumed run
        proc = start_tool(data_root, out, *opts, flags=["--resume"] if attempt else [])
        try:
            wait_for_iteration(out, 2 + 3 * attempt, proc)
        except AssertionError:
            break  # finished before the kill
        time.sleep(0.05 * attempt)
        proc.kill()
        proc.communicate()
        kills += 1
        name = (out / "last_checkpoint").read_text()
        torch.load(out / name, weights_only=True)  # loads completely: never a partial file
    assert kills == 2
    # the end in this process without the checkpoint every iteration (what the kills needed)
    final = train_here(out, *opts[:2], flags=["--resume"])
    assert final.returncode == 0, final.stderr
    assert (out / "last_checkpoint").read_text() == "model_final.pth"
    assert not [n for n in os.listdir(out) if ".tmp." in n]


def test_full_disk_is_one_line_and_keeps_the_previous_checkpoint(data_root, tmp_path):
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not available")
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("unprivileged mount namespaces are not available")
    out = tmp_path / "small"
    out.mkdir()
    # 200 MB holds one checkpoint of this model (134 MB) but not a second one: a checkpoint every
    # iteration (timed, at ~0 minutes) fills it at the second iteration (not at the end of a 2nd epoch)
    opts = ["SOLVER.CHECKPOINT_MINUTES", 0.00001, "SOLVER.CHECKPOINT_KEEP", 1]
    tool = " ".join(f"'{a}'" for a in _command(out, *opts))
    # the tmpfs lives as long as the namespace: look at what is left before leaving it
    script = (
        f'mount -t tmpfs -o size=200m tmpfs {out} && {{ {tool}; echo "rc=$?"; '
        f'echo "last=$(cat {out}/last_checkpoint)"; ls -a {out}; }}'
    )
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script],
        env=_env(data_root),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert "rc=1" in done.stdout, done.stdout + done.stderr
    line = last_line(done.stderr)
    assert line.startswith(f"No space left on device: {out}"), line
    assert "inline_container" not in done.stderr and "Traceback" not in done.stderr
    assert "last=model_iter0000000.pth" in done.stdout
    assert ".tmp." not in done.stdout
