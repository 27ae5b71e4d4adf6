"""One training run per output folder.

- :class:`RunLock`: ``OUTPUT_DIR/.fastreid-run.lock`` holds the pid and host of the run using the
  folder. A second run refuses with one line naming that pid. A lock whose process is gone (same
  host, dead pid) is stale and taken over automatically; ``--break-lock`` overrides any lock
  (for a run on another host that you know is gone).
- :func:`existing_run`: a folder that already holds checkpoints or metrics of a run; starting a new
  run there without ``--resume`` is refused (nothing is overwritten or deleted).
- :func:`remove_stale_temporaries`: ``.NAME.tmp.PID`` files that a writer killed mid-save left
  behind (checkpoints are written to such a name, then renamed).
- :func:`choose_run_folder`: where a command that runs again by itself (``make demo``, the
  ``make demo-*`` targets) puts its run: the interrupted run it finds is resumed, else a new
  folder is taken, so that two runs never share a folder and a finished run is never written over.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import re
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

from fastreid.config.validate import ensure_output_dir
from fastreid.utils import comm
from fastreid.utils.checkpoint import update_path
from fastreid.utils.errors import UserError
from fastreid.utils.resume_hint import resume_command

__all__ = [
    "LOCK_NAME",
    "OutputDirInUseError",
    "OutputDirNotEmptyError",
    "RunFolder",
    "RunLock",
    "choose_run_folder",
    "existing_run",
    "run_complete",
    "pid_alive",
    "remove_stale_temporaries",
]

LOCK_NAME = ".fastreid-run.lock"
_TEMPORARY = re.compile(r"^\..+\.tmp\.(\d+)$")

logger = logging.getLogger(__name__)


class OutputDirInUseError(UserError):
    """Another run holds the output folder's lock."""


class OutputDirNotEmptyError(UserError):
    """The output folder holds a previous run and ``--resume`` was not given."""


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists on this machine."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    except OSError:  # Windows: os.kill(pid, 0) is not a probe there
        return _pid_alive_windows(pid)
    return True


def _pid_alive_windows(pid: int) -> bool:
    handle = ctypes.windll.kernel32.OpenProcess(0x1000, False, pid)  # type: ignore[attr-defined]
    if not handle:
        return False
    ctypes.windll.kernel32.CloseHandle(handle)  # type: ignore[attr-defined]
    return True


class RunLock:
    """The lock file of one output folder; use as a context manager or acquire()/release()."""

    def __init__(self, output_dir: str, break_lock: bool = False) -> None:
        self.output_dir = output_dir
        self.path = os.path.join(output_dir, LOCK_NAME)
        self.break_lock = break_lock
        self._held = False

    def _read(self) -> dict[str, Any]:
        try:
            with open(self.path, encoding="utf-8") as f:
                return dict(json.load(f))
        except (OSError, ValueError, TypeError):
            return {}

    def _try_create(self) -> bool:
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}, f)
        return True

    def acquire(self) -> RunLock:
        ensure_output_dir(self.output_dir)  # one line when it cannot be a folder we write in
        for _ in range(3):
            if self._try_create():
                self._held = True
                return self
            owner = self._read()
            pid, host = int(owner.get("pid", -1)), str(owner.get("host", "?"))
            same_host = host == socket.gethostname()
            if pid == os.getpid() and same_host:
                self._held = True
                return self
            if same_host and not pid_alive(pid):
                logger.info(f"Removing the stale lock of a finished process (pid {pid}) in {self.output_dir}")
            elif self.break_lock:
                logger.warning(f"--break-lock: taking over {self.path} from pid {pid} on {host}")
            else:
                started = owner.get("started")
                since = time.strftime(" since %Y-%m-%d %H:%M", time.localtime(started)) if started else ""
                raise OutputDirInUseError(
                    f"OUTPUT_DIR {self.output_dir} is in use by another run (pid {pid} on {host}{since}). "
                    "Wait for it to finish, use another OUTPUT_DIR, or, if that run is gone, add --break-lock"
                )
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.path)
        raise OutputDirInUseError(f"Could not take the lock {self.path}; another run keeps creating it")

    def release(self) -> None:
        if not self._held:
            return
        self._held = False
        owner = self._read()
        if int(owner.get("pid", -1)) == os.getpid():
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.path)

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def existing_run(output_dir: str) -> Optional[str]:
    """A short description of the run already in ``output_dir`` (checkpoints, metrics), or None."""
    if not output_dir or not os.path.isdir(output_dir):
        return None
    names = os.listdir(output_dir)
    checkpoints = sorted(n for n in names if n.endswith(".pth") and not n.startswith("."))
    if "last_checkpoint" in names:
        with (
            contextlib.suppress(OSError),
            open(os.path.join(output_dir, "last_checkpoint"), encoding="utf-8") as f,
        ):
            return f"last checkpoint {f.read().strip()}"
    if checkpoints:
        return f"checkpoints {', '.join(checkpoints[:3])}{' ...' if len(checkpoints) > 3 else ''}"
    if "metrics.json" in names:
        return "metrics.json"
    return None


def remove_stale_temporaries(output_dir: str) -> int:
    """Delete ``.NAME.tmp.PID`` files in ``output_dir`` whose writer (PID) is no longer running;
    returns the number of bytes freed. Only the temporary names this project's atomic writes use
    are touched."""
    if not output_dir or not os.path.isdir(output_dir):
        return 0
    freed, removed = 0, []
    for name in os.listdir(output_dir):
        match = _TEMPORARY.match(name)
        if not match or int(match.group(1)) == os.getpid() or pid_alive(int(match.group(1))):
            continue
        path = os.path.join(output_dir, name)
        with contextlib.suppress(OSError):
            size = os.path.getsize(path)
            os.remove(path)
            freed += size
            removed.append(name)
    if removed:
        logger.info(
            f"Removed {len(removed)} temporary file(s) of interrupted checkpoint writes "
            f"({freed / 2**20:.1f} MB): {', '.join(sorted(removed))}"
        )
    return freed


def claim_output_dir(
    output_dir: str, *, resume: bool, break_lock: bool = False, check_existing: bool = True
) -> Optional[RunLock]:
    """Take the output folder for this run: its lock, the stale temporaries removed, and (when
    ``check_existing`` and not ``resume``) a refusal if it holds a previous run. Rank 0 decides;
    every rank raises the same error, so no process is left waiting for the others. Returns the
    lock (rank 0) to release at the end, or None."""
    lock: Optional[RunLock] = None
    error: Optional[UserError] = None
    if comm.is_main_process() and output_dir:
        try:
            lock = RunLock(output_dir, break_lock=break_lock).acquire()
            remove_stale_temporaries(output_dir)
            found = existing_run(output_dir) if check_existing and not resume else None
            if found:
                lock.release()
                lock = None
                raise OutputDirNotEmptyError(
                    f"OUTPUT_DIR {output_dir} already holds a training run ({found}); nothing was changed. "
                    f"Choose another OUTPUT_DIR, or continue it with: {resume_command()}"
                )
        except UserError as e:
            error = e
    errors = comm.all_gather(error)
    if errors[0] is not None:
        raise errors[0]
    return lock


def run_complete(output_dir: str) -> bool:
    """Whether the training run in ``output_dir`` is over: its last checkpoint is ``model_final.pth``
    and the state after the final evaluation went next to it (``DefaultTrainer._record_final_state``)."""
    try:
        with open(os.path.join(output_dir, "last_checkpoint"), encoding="utf-8") as f:
            last = f.read().strip()
    except OSError:
        return False
    final = os.path.join(output_dir, "model_final.pth")
    return last == "model_final.pth" and os.path.isfile(final) and os.path.isfile(update_path(final))


def _in_use(folder: str) -> Optional[int]:
    """The pid of a live run holding ``folder``'s lock (this host), or None."""
    try:
        with open(os.path.join(folder, LOCK_NAME), encoding="utf-8") as f:
            owner = dict(json.load(f))
    except (OSError, ValueError, TypeError):
        return None
    pid = int(owner.get("pid", -1))
    same_host = owner.get("host") == socket.gethostname()
    return pid if pid != os.getpid() and (not same_host or pid_alive(pid)) else None


@dataclass(frozen=True)
class RunFolder:
    """Where a run goes: ``path``, whether a run there is continued (``resume``), and ``line``, the
    one line that says which."""

    path: str
    resume: bool
    line: str


def choose_run_folder(base: str, stages: Sequence[str] = ("",), *, stamp: Optional[str] = None) -> RunFolder:
    """The run folder of a command that is simply run again to continue (``make demo``): ``base``
    for the first run, ``base-YYYYmmdd-HHMMSS`` for each later one. The newest of them is resumed
    when it holds an interrupted run (a stage folder that has started but not completed), taken
    when it is empty, and otherwise (complete, or in use by a running process) left as it is for a
    new folder. ``stages`` are the sub-folders of one run (``("teacher", "student")``; ``""``: the
    folder itself); a run is complete when every stage is."""
    parent, name = os.path.split(os.path.normpath(base))
    siblings = []
    if os.path.isdir(parent or "."):
        pattern = re.compile(re.escape(name) + r"-\d{8}-\d{6}(-\d+)?$")
        siblings = sorted(n for n in os.listdir(parent or ".") if pattern.match(n))
    newest = os.path.join(parent, siblings[-1]) if siblings else base
    folders = [os.path.join(newest, s) if s else newest for s in stages]
    started = [f for f in folders if existing_run(f)]
    busy = next((pid for pid in map(_in_use, folders) if pid is not None), None)
    if busy is None and not started:
        return RunFolder(newest, False, f"Starting a new run in {newest}")
    if busy is None and not all(run_complete(f) for f in folders):
        return RunFolder(newest, True, f"Resuming the interrupted run in {newest}")
    new = f"{base}-{stamp or time.strftime('%Y%m%d-%H%M%S')}"
    candidate, n = new, 1
    while os.path.exists(candidate):
        n += 1
        candidate = f"{new}-{n}"
    why = f"in use by process {busy}" if busy is not None else "holds a finished run, kept as it is"
    return RunFolder(candidate, False, f"Starting a new run in {candidate} ({newest} {why})")
