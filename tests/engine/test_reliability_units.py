"""Reliability pieces in one process: a signal during torch.save, metrics.json after a crash,
the run lock and leftovers, the best model across resume, evaluations skipped by a stop or that
fail, timed checkpoints."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys

import pytest
import torch
from test_training_end_to_end import DefaultTrainer, data_root, run_training, tiny_cfg  # noqa: F401

from fastreid.engine import EvaluationFailedError, HookBase, TrainingInterruptedError
from fastreid.engine.run_dir import OutputDirInUseError, RunLock, choose_run_folder, remove_stale_temporaries
from fastreid.utils.checkpoint import Checkpointer
from fastreid.utils.events import EventStorage, JSONWriter, get_event_storage, read_metrics


def test_ctrl_c_during_torch_save_is_a_keyboard_interrupt_and_keeps_the_old_file(tmp_path):
    path = tmp_path / "model.pth"
    Checkpointer.write(str(path), {"w": torch.ones(3)})
    big = {"w": torch.zeros(30_000_000)}

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.02)
        with pytest.raises(KeyboardInterrupt):
            for _ in range(200):  # the timer fires during one of these writes
                Checkpointer.write(str(path), big)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert sorted(os.listdir(tmp_path)) == ["model.pth"]
    saved = torch.load(path, weights_only=True)["w"]
    assert saved.numel() in (3, 30_000_000)  # the old file or a complete new one


def test_metrics_json_gets_late_scalars_and_survives_a_partial_line(tmp_path):
    path = tmp_path / "metrics.json"
    path.write_text('{"iteration": 0, "total_loss": 1.0}\n{"iteration": 1, "total_lo')  # killed mid-line
    writer = JSONWriter(str(path))
    with EventStorage(5) as storage:
        storage.put_scalar("total_loss", 2.0)
        writer.write()
        storage.put_scalar("Rank-1", 50.0, smoothing_hint=False)  # evaluation after the write
        writer.write()
    writer.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines == [
        {"iteration": 0, "total_loss": 1.0},
        {"iteration": 5, "total_loss": 2.0},
        {"iteration": 5, "Rank-1": 50.0},
    ]


def test_a_resumed_run_drops_what_it_trains_again_and_readers_count_each_iteration_once(tmp_path):
    """The issue's folder: a run killed after iteration 5 (checkpoint after 3, evaluated there),
    then resumed after iteration 3 with the evaluation of 3 run again."""
    path = tmp_path / "metrics.json"
    killed = [{"iteration": i, "lr": 0.1, "total_loss": 9.0 - i} for i in range(4)]
    killed += [{"iteration": 3, "Rank-1": 10.0}] + [
        {"iteration": i, "lr": 0.1, "total_loss": 0.5} for i in (4, 5)
    ]
    text = "".join(json.dumps(r) + "\n" for r in killed)
    path.write_text(text)
    # a reader of the folder as it is (or as a version without the drop left it) sees each once
    (tmp_path / "old.json").write_text(
        text + '{"iteration": 3, "Rank-1": 20.0}\n{"iteration": 4, "total_loss": 4.0}\n'
    )
    merged = read_metrics(str(tmp_path / "old.json"))
    assert [r["iteration"] for r in merged] == [0, 1, 2, 3, 4, 5]
    assert merged[3]["Rank-1"] == 20.0 and merged[3]["total_loss"] == 6.0 and merged[4]["total_loss"] == 4.0

    writer = JSONWriter(str(path))
    assert writer.discard_from(4, {"Rank-1"}) == 3  # lines 4 and 5, and the evaluation at 3
    with EventStorage(3) as storage:
        storage.put_scalar("Rank-1", 20.0, smoothing_hint=False)  # the evaluation of 3, again
        storage.iter = 4
        storage.put_scalar("total_loss", 4.0)
        writer.write()
    writer.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["iteration"] for r in lines] == [0, 1, 2, 3, 3, 4]
    assert lines[-2:] == [{"iteration": 3, "Rank-1": 20.0}, {"iteration": 4, "total_loss": 4.0}]
    assert lines[:4] == killed[:4]


def test_run_lock_live_dead_and_broken(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / ".fastreid-run.lock").write_text(
            json.dumps({"pid": sleeper.pid, "host": socket.gethostname()})
        )
        with pytest.raises(OutputDirInUseError, match=f"pid {sleeper.pid} on"):
            RunLock(str(tmp_path)).acquire()
        with RunLock(str(tmp_path), break_lock=True):
            assert json.loads((tmp_path / ".fastreid-run.lock").read_text())["pid"] == os.getpid()
        assert not (tmp_path / ".fastreid-run.lock").exists()
    finally:
        sleeper.kill()
        sleeper.wait()
    (tmp_path / ".fastreid-run.lock").write_text(
        json.dumps({"pid": sleeper.pid, "host": socket.gethostname()})
    )
    with RunLock(str(tmp_path)):  # dead pid on this host: stale, taken over
        pass


def test_only_temporaries_of_dead_writers_are_removed(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    names = [
        f".model_0001.pth.tmp.{dead.pid}",
        f".model_0002.pth.tmp.{os.getpid()}",
        "model_0001.pth",
        f"notes.tmp.{dead.pid}",
        "user_file.txt",
    ]
    for n in names:
        (tmp_path / n).write_bytes(b"1234")
    assert remove_stale_temporaries(str(tmp_path)) == 4
    assert sorted(os.listdir(tmp_path)) == sorted(names[1:])


class _ScriptedEval(DefaultTrainer):
    """Evaluation results scripted by epoch (read from the storage's iteration), or an error."""

    script: dict = {}

    @classmethod
    def test(cls, cfg, model):
        epoch = get_event_storage().iter // 8
        value = cls.script[epoch]
        if isinstance(value, Exception):
            raise value
        return {"metric": value, "Rank-1": value}


class _Fail(HookBase):
    def __init__(self, iteration):
        self.iteration = iteration

    def after_step(self):
        if self.trainer.iter == self.iteration:
            raise RuntimeError("simulated kill")


class _Signal(HookBase):
    def __init__(self, iteration):
        self.iteration = iteration

    def after_step(self):
        if self.trainer.iter == self.iteration:
            os.kill(os.getpid(), signal.SIGINT)


def _evaluations(out):
    lines = [json.loads(line) for line in (out / "metrics.json").read_text().splitlines()]
    return [(line["iteration"], line["metric"]) for line in lines if "metric" in line]


@pytest.mark.slow
def test_best_model_survives_a_kill_and_resume(tiny_cfg, tmp_path):  # noqa: F811
    _ScriptedEval.script = {0: 50.0, 1: 80.0, 2: 60.0}
    cfg = tiny_cfg(tmp_path, "SOLVER.MAX_EPOCH", 3, "TEST.EVAL_PERIOD", 1)
    with pytest.raises(RuntimeError, match="simulated kill"):
        run_training(cfg, extra_hooks=[_Fail(16)], trainer_cls=_ScriptedEval)  # killed in epoch 2
    # model_0001.pth was written before epoch 1's evaluation: its state has best 50
    assert torch.load(tmp_path / "model_best.pth", weights_only=True)["best_metric"] == 80.0
    trainer, _ = run_training(cfg, resume=True, trainer_cls=_ScriptedEval)
    best = torch.load(tmp_path / "model_best.pth", weights_only=True)
    assert best["best_metric"] == 80.0 and best["best_iteration"] == 15  # not the later 60
    assert _evaluations(tmp_path)[-2:] == [(15, 80.0), (23, 60.0)]  # epoch 1's evaluation re-run


@pytest.mark.slow
def test_a_best_model_write_that_was_killed_is_recreated(tiny_cfg, tmp_path, monkeypatch):  # noqa: F811
    _ScriptedEval.script = {0: 50.0, 1: 80.0}
    cfg = tiny_cfg(tmp_path, "SOLVER.MAX_EPOCH", 2, "TEST.EVAL_PERIOD", 1)
    real_save = Checkpointer.save
    best_writes = []

    def dying_save(self, name, **kwargs):
        if name == "model_best":
            best_writes.append(kwargs["best_metric"])
            if len(best_writes) == 2:
                raise KeyboardInterrupt  # killed while writing the second best model
        return real_save(self, name, **kwargs)

    monkeypatch.setattr(Checkpointer, "save", dying_save)
    with pytest.raises(KeyboardInterrupt):
        run_training(cfg, trainer_cls=_ScriptedEval)
    monkeypatch.undo()
    assert torch.load(tmp_path / "model_best.pth", weights_only=True)["best_metric"] == 50.0
    assert (tmp_path / "last_checkpoint").read_text() == "model_final.pth"
    # the final checkpoint was written before the final evaluation, which is re-run on resume
    run_training(cfg, resume=True, trainer_cls=_ScriptedEval)
    assert torch.load(tmp_path / "model_best.pth", weights_only=True)["best_metric"] == 80.0


@pytest.mark.slow
def test_stop_at_the_end_of_an_epoch_skips_evaluation_until_resume_and_the_end_is_written_once(
    tiny_cfg,  # noqa: F811
    tmp_path,
    monkeypatch,
):
    _ScriptedEval.script = {0: 10.0, 1: 20.0}
    cfg = tiny_cfg(tmp_path, "SOLVER.MAX_EPOCH", 2, "TEST.EVAL_PERIOD", 1)
    with pytest.raises(TrainingInterruptedError) as stopped:
        run_training(cfg, extra_hooks=[_Signal(7)], trainer_cls=_ScriptedEval)
    assert stopped.value.exit_code == 130
    assert _evaluations(tmp_path) == []
    assert (tmp_path / "last_checkpoint").read_text() == "model_0000.pth"  # the epoch's, not a second one

    real_write = Checkpointer.write
    written = []

    def counting_write(path, data):
        written.append(os.path.basename(path))
        real_write(path, data)

    monkeypatch.setattr(Checkpointer, "write", staticmethod(counting_write))
    run_training(cfg, resume=True, trainer_cls=_ScriptedEval)
    assert _evaluations(tmp_path) == [(7, 10.0), (15, 20.0)]
    # the weights of the end once, before the final evaluation; the trainer state after it, next to them
    assert written.count("model_final.pth") == 1 and written[-1] == "model_final.pth.update"
    written.clear()
    trainer, results = run_training(cfg, resume=True, trainer_cls=_ScriptedEval)
    assert results is None and written == [] and trainer.start_iter == trainer.max_iter
    assert _evaluations(tmp_path) == [(7, 10.0), (15, 20.0)]  # the final one not run again


@pytest.mark.slow
def test_failed_periodic_evaluation_lets_training_finish_then_reports(tiny_cfg, tmp_path):  # noqa: F811
    _ScriptedEval.script = {0: ValueError("all query identities do not appear in gallery"), 1: 20.0}
    cfg = tiny_cfg(tmp_path, "SOLVER.MAX_EPOCH", 2, "TEST.EVAL_PERIOD", 1)
    with pytest.raises(EvaluationFailedError, match="after iteration 8: ValueError: all query") as failed:
        run_training(cfg, trainer_cls=_ScriptedEval)
    assert failed.value.exit_code == 3
    assert (tmp_path / "last_checkpoint").read_text() == "model_final.pth"
    assert _evaluations(tmp_path) == [(15, 20.0)]


@pytest.mark.slow
def test_timed_checkpoints_keep_the_newest(tiny_cfg, tmp_path):  # noqa: F811
    cfg = tiny_cfg(
        tmp_path,
        "SOLVER.MAX_ITER",
        4,
        "SOLVER.CHECKPOINT_PERIOD",
        100,
        "TEST.EVAL_PERIOD",
        100,
        "SOLVER.CHECKPOINT_MINUTES",
        1e-6,
        "SOLVER.CHECKPOINT_KEEP",
        2,
    )
    _ScriptedEval.script = {0: 1.0}
    run_training(cfg, trainer_cls=_ScriptedEval)
    timed = sorted(n for n in os.listdir(tmp_path) if n.startswith("model_iter"))
    # the rotated checkpoints went with their checksum sidecars
    assert timed == [
        "model_iter0000001.pth",
        "model_iter0000001.pth.sha256",
        "model_iter0000002.pth",
        "model_iter0000002.pth.sha256",
    ]
    assert (tmp_path / "last_checkpoint").read_text() == "model_final.pth"
    state = torch.load(tmp_path / "model_final.pth", weights_only=True)["trainer"]
    assert state["hooks"]["PeriodicCheckpointer"]["timed"] == [n for n in timed if n.endswith(".pth")]


def test_stop_signals_first_sets_a_flag_second_ctrl_c_raises():
    from fastreid.engine.interrupts import StopSignals

    before = signal.getsignal(signal.SIGINT)
    with StopSignals() as stop:
        os.kill(os.getpid(), signal.SIGUSR1)  # SLURM's preemption warning
        assert stop.requested and stop.name == "SIGUSR1" and stop.exit_code == 138
        os.kill(os.getpid(), signal.SIGTERM)  # a repeated scheduler signal changes nothing
        assert stop.exit_code == 138
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)  # the second Ctrl-C: at once
    assert signal.getsignal(signal.SIGINT) is before


def _run_files(folder, last, final_update=False):
    """The files choose_run_folder reads: last_checkpoint naming ``last`` (and that file)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "last_checkpoint").write_text(last)
    (folder / last).write_bytes(b"x")
    if final_update:
        (folder / f"{last}.update").write_bytes(b"x")


def test_choose_run_folder_resumes_the_interrupted_run_and_keeps_a_finished_one(tmp_path):
    base = tmp_path / "demo"
    first = choose_run_folder(str(base))
    assert (first.path, first.resume, first.line) == (str(base), False, f"Starting a new run in {base}")

    _run_files(base, "model_iter0000004.pth")  # stopped by a signal or killed
    again = choose_run_folder(str(base))
    assert (again.path, again.resume) == (str(base), True) and again.line.startswith(
        "Resuming the interrupted"
    )

    _run_files(base, "model_final.pth")  # written, but killed in the final evaluation
    assert choose_run_folder(str(base)).resume

    _run_files(base, "model_final.pth", final_update=True)  # complete
    new = choose_run_folder(str(base), stamp="20260101-000000")
    assert (new.path, new.resume) == (f"{base}-20260101-000000", False)
    assert new.line == f"Starting a new run in {new.path} ({base} holds a finished run, kept as it is)"

    # the newest run folder is the one looked at; the same second twice gets a suffix
    (tmp_path / "demo-20260101-000000").mkdir()
    _run_files(tmp_path / "demo-20260101-000000", "model_0000.pth")
    assert choose_run_folder(str(base)).path == f"{base}-20260101-000000"
    _run_files(tmp_path / "demo-20260101-000000", "model_final.pth", final_update=True)
    assert choose_run_folder(str(base), stamp="20260101-000000").path == f"{base}-20260101-000000-2"


def test_choose_run_folder_of_stages_and_of_a_folder_in_use(tmp_path):
    base = tmp_path / "distill"
    _run_files(base / "teacher", "model_final.pth", final_update=True)
    # the teacher is complete, the student never started: the run is not over
    assert choose_run_folder(str(base), ["teacher", "student"]).resume
    _run_files(base / "student", "model_final.pth", final_update=True)
    assert not choose_run_folder(str(base), ["teacher", "student"]).resume

    busy = tmp_path / "busy"
    _run_files(busy, "model_0000.pth")
    (busy / ".fastreid-run.lock").write_text(json.dumps({"pid": os.getppid(), "host": socket.gethostname()}))
    chosen = choose_run_folder(str(busy), stamp="20260101-000000")
    assert not chosen.resume and chosen.path == f"{busy}-20260101-000000"
    assert f"in use by process {os.getppid()}" in chosen.line
