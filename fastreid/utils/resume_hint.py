"""The one decider of the command that continues an interrupted run: what a stop signal, a lost
peer, a full disk or a stopped search prints after "Resume with:".

The command is the one the user typed, rebuilt from what this process can see, with ``--resume``
added where the program takes it:

- ``python tools/train_net.py ...`` / ``python -m fastreid.cli.train ...`` / ``fastreid-train ...``:
  the interpreter as typed and its options (``sys.orig_argv``), the script, the module or the
  console script's name (when ``PATH`` finds that very file), then the arguments.
- Under ``torchrun`` (``TORCHELASTIC_RUN_ID`` is set): torchrun's own command line, read from the
  parent process (``/proc`` on Linux) when its arguments end with this process's; elsewhere it is
  rebuilt from the variables torchrun documents (``LOCAL_WORLD_SIZE``, ``GROUP_WORLD_SIZE``,
  ``GROUP_RANK``, ``TORCHELASTIC_MAX_RESTARTS``, ``MASTER_ADDR``/``MASTER_PORT``), which name no
  rendezvous backend: check ``--rdzv-*`` options against your own command there.
- ``FASTREID_LAUNCHER``: a launcher that hands its arguments on to this process sets its own path
  (``train_windows_recommended.bat``); the command is that launcher, in the syntax of its shell.
- ``FASTREID_MAKE_GOAL``: a make target that resumes when run again (the Makefile's demo targets);
  the command is ``make <goal>`` with the variables given on make's command line (``MAKEFLAGS``).
- ``FASTREID_RESUME_COMMAND``: the command already decided, recorded by :func:`recorded` for the
  processes this one starts (DDP ranks spawned by ``launch``, a demo's training).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import Callable, Optional

__all__ = [
    "COMMAND_ENV",
    "LAUNCHER_ENV",
    "MAKE_GOAL_ENV",
    "decide",
    "recorded",
    "resume_command",
]

COMMAND_ENV = "FASTREID_RESUME_COMMAND"
LAUNCHER_ENV = "FASTREID_LAUNCHER"
MAKE_GOAL_ENV = "FASTREID_MAKE_GOAL"
RESUME_FLAG = "--resume"

# torchrun's console script and the modules that run its agent
_TORCH_LAUNCHERS = ("torch.distributed.run", "torch.distributed.launch")


def resume_command(*, resume_flag: bool = True) -> str:
    """The command that continues this process's run (recorded, or decided now)."""
    return os.environ.get(COMMAND_ENV) or decide(resume_flag=resume_flag)


@contextlib.contextmanager
def recorded(*, resume_flag: bool = True) -> Iterator[str]:
    """Decide the command once, in this process, and keep it in ``FASTREID_RESUME_COMMAND`` while
    the block runs: the processes it starts (which see another command line) print the same one.
    A command recorded by an outer process wins."""
    previous = os.environ.get(COMMAND_ENV)
    command = previous or decide(resume_flag=resume_flag)
    os.environ[COMMAND_ENV] = command
    try:
        yield command
    finally:
        if previous is None:
            os.environ.pop(COMMAND_ENV, None)
        else:
            os.environ[COMMAND_ENV] = previous


def decide(
    *,
    resume_flag: bool = True,
    argv: Optional[Sequence[str]] = None,
    orig_argv: Optional[Sequence[str]] = None,
    environ: Optional[Mapping[str, str]] = None,
    parent_argv: Optional[Sequence[str]] = None,
    which: Callable[[str], Optional[str]] = shutil.which,
    windows: Optional[bool] = None,
) -> str:
    """The command, from this process's facts (each may be given, for tests and other processes):
    ``argv`` (``sys.argv``), ``orig_argv`` (``sys.orig_argv``: the interpreter and its options),
    ``environ``, ``parent_argv`` (the parent's command line, read under torchrun when not given),
    ``which`` (how ``PATH`` is searched) and ``windows`` (cmd.exe's quoting; ``os.name == "nt"``).
    ``resume_flag``: whether the program continues a run with ``--resume`` (False: running the
    same command again resumes, as ``tools/demo.py`` does)."""
    env = os.environ if environ is None else environ
    argv = list(sys.argv if argv is None else argv)
    orig_argv = list(getattr(sys, "orig_argv", argv) if orig_argv is None else orig_argv)
    windows = os.name == "nt" if windows is None else windows

    goal = env.get(MAKE_GOAL_ENV)
    if goal:
        return shlex.join(["make", goal, *make_variables(env.get("MAKEFLAGS", ""))])

    args = list(argv[1:])
    if resume_flag and RESUME_FLAG not in args:
        args.insert(0, RESUME_FLAG)
    launcher = env.get(LAUNCHER_ENV)
    if launcher:
        cmd_syntax = windows or launcher.lower().endswith((".bat", ".cmd"))
        return _join([launcher, *args], cmd_syntax)

    program = _program(orig_argv, argv, which)
    if env.get("TORCHELASTIC_RUN_ID"):
        if parent_argv is None:
            parent_argv = _parent_argv()
        program = _torchrun_program(program, argv, env, parent_argv, which)
    return _join([*program, *args], windows)


def make_variables(makeflags: str) -> list[str]:
    """The ``NAME=value`` arguments of make's command line, from ``MAKEFLAGS`` (make writes them
    after `` -- ``, the last given first, spaces escaped with a backslash and ``$`` doubled)."""
    _, sep, tail = makeflags.partition(" -- ")
    if not sep:
        tail = makeflags[3:] if makeflags.startswith("-- ") else ""
    words, word, escaped = [], "", False
    for ch in tail:
        if escaped:
            word += ch
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == " ":
            if word:
                words.append(word)
            word = ""
        else:
            word += ch
    if word:
        words.append(word)
    return [w.replace("$$", "$") for w in reversed(words) if "=" in w]


def _join(words: Sequence[str], cmd_syntax: bool) -> str:
    return subprocess.list2cmdline(list(words)) if cmd_syntax else shlex.join(words)


def _program(
    orig_argv: Sequence[str], argv: Sequence[str], which: Callable[[str], Optional[str]]
) -> list[str]:
    """What runs the program, without its arguments: the interpreter as typed with its options and
    the script (or ``-m module``), or a console script's name alone."""
    args = list(argv[1:])
    n = len(orig_argv) - len(args)
    if n >= 1 and list(orig_argv[n:]) == args:
        prefix = list(orig_argv[:n])
    else:  # an embedding interpreter or an odd launcher: the interpreter running the script
        prefix = [sys.executable, *argv[:1]]
    if len(prefix) == 2:
        name = _console_script(prefix[1], which)
        if name:
            return [name]
    return prefix


def _console_script(path: str, which: Callable[[str], Optional[str]]) -> Optional[str]:
    """The name to type for ``path`` when it is an installed command (not a ``.py`` file) that
    ``PATH`` finds as this very file; its full path when ``PATH`` does not; None for a script."""
    stem, ext = os.path.splitext(os.path.basename(path))
    if ext.lower() not in ("", ".exe"):
        return None  # a script (.py), run by the interpreter
    executable = path if os.path.isfile(path) else path + ".exe"
    if not (os.path.isfile(executable) and os.access(executable, os.X_OK)):
        return None
    found = which(stem)
    if found and os.path.realpath(found) in (os.path.realpath(path), os.path.realpath(path + ".exe")):
        return stem
    return path


def _parent_argv() -> Optional[list[str]]:
    """The parent process's command line, where the system shows it (Linux's ``/proc``)."""
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    words = [w.decode(errors="surrogateescape") for w in raw.split(b"\0")]
    return words[:-1] if words and words[-1] == "" else words


def _torchrun_program(
    program: list[str],
    argv: Sequence[str],
    env: Mapping[str, str],
    parent_argv: Optional[Sequence[str]],
    which: Callable[[str], Optional[str]],
) -> list[str]:
    """torchrun's command line up to this process's arguments: the parent's own when it is a torch
    launcher whose arguments end with ours, else rebuilt from torchrun's environment."""
    args = list(argv[1:])
    if parent_argv:
        n = len(parent_argv) - len(args)
        launcher = list(parent_argv[:n])
        is_torch = any(os.path.basename(w) in ("torchrun", "torchrun.exe") for w in launcher[:2]) or any(
            m in launcher for m in _TORCH_LAUNCHERS
        )
        if n >= 2 and is_torch and list(parent_argv[n:]) == args:
            if os.path.basename(launcher[1]).startswith("torchrun"):
                name = _console_script(launcher[1], which)
                return [name or launcher[1], *launcher[2:]]
            return launcher
    return _torchrun_from_environment(program, env)


def _torchrun_from_environment(program: list[str], env: Mapping[str, str]) -> list[str]:
    """``torchrun`` with the options its environment shows, then the script or ``-m module``
    (torchrun runs ``python -u`` itself: the interpreter and its options are dropped)."""
    target = program[1:]
    while target and target[0].startswith("-") and target[0] != "-m":
        target = target[1:]  # the interpreter's options (-u, -X ...)
    nodes = int(env.get("GROUP_WORLD_SIZE", "1") or 1)
    words = ["torchrun"]
    if nodes > 1:
        words += ["--nnodes", str(nodes), "--node-rank", env.get("GROUP_RANK", "0")]
        words += [
            "--master-addr",
            env.get("MASTER_ADDR", "127.0.0.1"),
            "--master-port",
            env.get("MASTER_PORT", "29500"),
        ]
    else:
        words += ["--standalone"]
    words += ["--nproc-per-node", env.get("LOCAL_WORLD_SIZE", "1")]
    restarts = int(env.get("TORCHELASTIC_MAX_RESTARTS", "0") or 0)
    if restarts:
        words += ["--max-restarts", str(restarts)]
    return [*words, *target]
