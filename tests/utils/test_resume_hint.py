"""The resume command each way of starting a run gets (fastreid.utils.resume_hint.decide), from the
facts of a process given by hand. The commands themselves are run after real signals in
tests/engine/test_resume_commands.py (train_net, fastreid-train, torchrun, the Windows launcher)
and tests/tools/test_demo_runs.py (make demo)."""

from __future__ import annotations

import os
import shlex
import stat

import pytest

from fastreid.utils import resume_hint
from fastreid.utils.resume_hint import decide, make_variables, recorded

ARGS = ["--config-file", "configs/Market1501/bagtricks_R50.yml", "OUTPUT_DIR", "logs/my run"]


def _script(path, text="#!/usr/bin/env python\n"):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_a_script_gets_the_interpreter_as_typed_and_resume_first():
    command = decide(
        windows=False,
        argv=["tools/train_net.py", *ARGS],
        orig_argv=["python3", "-X", "dev", "tools/train_net.py", *ARGS],
        environ={},
    )
    assert shlex.split(command) == ["python3", "-X", "dev", "tools/train_net.py", "--resume", *ARGS]
    # given twice it is not repeated; without the flag (a program resumed by running it again) none
    again = decide(
        windows=False,
        argv=["tools/train_net.py", "--resume", *ARGS],
        orig_argv=["python", "tools/train_net.py", "--resume", *ARGS],
        environ={},
    )
    assert shlex.split(again).count("--resume") == 1
    plain = decide(
        windows=False,
        resume_flag=False,
        argv=["tools/demo.py", "--root", "d"],
        orig_argv=["python", "tools/demo.py", "--root", "d"],
        environ={},
    )
    assert plain == "python tools/demo.py --root d"


def test_a_module_keeps_dash_m():
    argv = ["/checkout/fastreid/cli/train.py", *ARGS]
    command = decide(
        windows=False, argv=argv, orig_argv=["python", "-m", "fastreid.cli.train", *ARGS], environ={}
    )
    assert shlex.split(command) == ["python", "-m", "fastreid.cli.train", "--resume", *ARGS]


def test_a_console_script_is_its_name_when_path_finds_it(tmp_path):
    exe = _script(tmp_path / "fastreid-train")
    facts = {"argv": [exe, *ARGS], "orig_argv": ["/venv/bin/python", exe, *ARGS], "environ": {}}
    assert shlex.split(
        decide(**facts, windows=False, which=lambda name: exe if name == "fastreid-train" else None)
    )[:2] == [
        "fastreid-train",
        "--resume",
    ]
    # another fastreid-train first on PATH, or none: the installed file itself, by its path
    other = _script(tmp_path / "elsewhere")
    assert shlex.split(decide(**facts, windows=False, which=lambda name: other))[0] == exe
    assert shlex.split(decide(**facts, windows=False, which=lambda name: None))[0] == exe


TORCHRUN_ENV = {
    "TORCHELASTIC_RUN_ID": "abc",
    "LOCAL_WORLD_SIZE": "2",
    "GROUP_WORLD_SIZE": "1",
    "GROUP_RANK": "0",
}


def test_under_torchrun_the_launcher_and_its_arguments_are_kept(tmp_path):
    torchrun = _script(tmp_path / "torchrun")
    worker = {
        "argv": ["tools/train_net.py", *ARGS],
        "orig_argv": ["/venv/bin/python", "-u", "tools/train_net.py", *ARGS],
    }
    parent = [
        "/venv/bin/python",
        torchrun,
        "--nproc-per-node",
        "2",
        "--max-restarts",
        "1",
        "tools/train_net.py",
        *ARGS,
    ]
    command = decide(
        **worker, windows=False, environ=TORCHRUN_ENV, parent_argv=parent, which=lambda n: torchrun
    )
    assert shlex.split(command) == [
        "torchrun",
        "--nproc-per-node",
        "2",
        "--max-restarts",
        "1",
        "tools/train_net.py",
        "--resume",
        *ARGS,
    ]
    # python -m torch.distributed.run ... -m fastreid.cli.train
    module = {
        "argv": ["/c/fastreid/cli/train.py", *ARGS],
        "orig_argv": ["/venv/bin/python", "-u", "-m", "fastreid.cli.train", *ARGS],
    }
    parent = [
        "python",
        "-m",
        "torch.distributed.run",
        "--nproc-per-node=2",
        "-m",
        "fastreid.cli.train",
        *ARGS,
    ]
    command = decide(**module, windows=False, environ=TORCHRUN_ENV, parent_argv=parent)
    assert shlex.split(command) == [*parent[: -len(ARGS)], "--resume", *ARGS]


@pytest.mark.parametrize("nodes", [1, 2])
@pytest.mark.parametrize("module", [False, True], ids=["script", "module"])
def test_under_torchrun_unseen_the_launcher_is_rebuilt_from_its_environment(nodes, module):
    """A parent that is not torchrun's agent (or unreadable): the documented variables, parsed back
    by torchrun's own parser."""
    from torch.distributed.run import get_args_parser

    target = ["-m", "fastreid.cli.train"] if module else ["tools/train_net.py"]
    argv = ["/c/fastreid/cli/train.py" if module else "tools/train_net.py", *ARGS]
    env = {**TORCHRUN_ENV, "GROUP_WORLD_SIZE": str(nodes), "GROUP_RANK": str(nodes - 1),
           "TORCHELASTIC_MAX_RESTARTS": "3", "MASTER_ADDR": "host0", "MASTER_PORT": "29400"}  # fmt: skip
    for parent in (None, ["/bin/bash"], ["python", "-m", "torch.distributed.run", "other.py", "--x"]):
        command = decide(windows=False, argv=argv, orig_argv=["/venv/bin/python", "-u", *target, *ARGS], environ=env,
                         parent_argv=parent or [], which=lambda n: None)  # fmt: skip
        words = shlex.split(command)
        assert words[0] == "torchrun"
        parsed = get_args_parser().parse_args(words[1:])
        assert parsed.nproc_per_node == "2" and parsed.max_restarts == 3
        assert parsed.module == module and parsed.training_script == target[-1]
        assert parsed.training_script_args == ["--resume", *ARGS]
        if nodes == 1:
            assert parsed.standalone
        else:
            assert (parsed.nnodes, parsed.node_rank, parsed.master_addr, parsed.master_port) == (
                "2",
                1,
                "host0",
                29400,
            )


def test_make_targets_are_run_again_with_their_variables():
    env = {
        resume_hint.MAKE_GOAL_ENV: "demo-attr",
        "MAKEFLAGS": r"ks -j2 --jobserver-auth=3,4 -- DEMO_OPTS=SOLVER.MAX_EPOCH\ 1 DEMO_ATTR_OUT=logs/a$$b",
    }
    command = decide(
        windows=False,
        argv=["tools/demo.py", "--family", "attr"],
        orig_argv=["python", "tools/demo.py"],
        environ=env,
    )
    assert shlex.split(command) == [
        "make",
        "demo-attr",
        "DEMO_ATTR_OUT=logs/a$b",
        "DEMO_OPTS=SOLVER.MAX_EPOCH 1",
    ]
    assert make_variables("") == [] and make_variables(" -- X=1") == ["X=1"] and make_variables("k") == []


def test_the_windows_launcher_in_cmd_syntax():
    bat = r"C:\Users\me\fast reid\train_windows_recommended.bat"
    args = ["--config-file", r"configs\Market1501\bagtricks_R50.yml", "OUTPUT_DIR", r"C:\my logs\run"]
    env = {resume_hint.LAUNCHER_ENV: bat}
    command = decide(argv=["train_windows_patched.py", *args], orig_argv=["python", "train_windows_patched.py", *args],
                     environ=env, windows=False)  # fmt: skip
    assert command == (
        r'"C:\Users\me\fast reid\train_windows_recommended.bat" --resume --config-file '
        r'configs\Market1501\bagtricks_R50.yml OUTPUT_DIR "C:\my logs\run"'
    )


def test_a_recorded_command_reaches_child_processes_and_is_restored(monkeypatch):
    monkeypatch.delenv(resume_hint.COMMAND_ENV, raising=False)
    monkeypatch.setattr("sys.argv", ["tools/train_net.py", *ARGS])
    monkeypatch.setattr("sys.orig_argv", ["python", "tools/train_net.py", *ARGS])
    with recorded() as command:
        assert os.environ[resume_hint.COMMAND_ENV] == command == resume_hint.resume_command()
        with recorded(resume_flag=False) as inner:  # an outer process's command wins
            assert inner == command
        monkeypatch.setattr("sys.argv", ["-c", "--multiprocessing-fork"])  # what a spawned rank sees
        assert resume_hint.resume_command() == command
    assert resume_hint.COMMAND_ENV not in os.environ
