"""Fixtures shared by every test folder."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Optional

import pytest

from fastreid.utils.threads import available_cpus

# torch is imported by the fixtures that use it, not here: pytest-xdist's controller loads this file
# before it starts the workers and runs no test (an import of torch there, ~3 s of one core, delayed
# every worker's start)

# `make test` runs the suite under make: a test that runs `make demo` would inherit the outer make's
# level and flags (its jobserver, "make[1]: Entering directory" lines in the output it reads, the
# outer command line's variables in a printed resume hint). Each test starts as from a shell.
for _name in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES"):
    os.environ.pop(_name, None)

# A suite started with SIGINT ignored (a background job of a non-interactive shell: `make test &`)
# passes that on to every command it starts (an ignored signal stays ignored across exec), and a
# command that takes Ctrl+C as Python's KeyboardInterrupt (fastreid-serve --replicas) never stops.
# The test processes (pytest-xdist's workers keep the disposition) take Ctrl+C as from a terminal.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

DURATIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "durations.json")


def pytest_collection_modifyitems(config, items) -> None:
    """The heaviest test files first, by the seconds each took in a recorded run (tests/durations.json,
    written by tools/dev/suite_durations.py; files it does not name go last, in collection order).
    pytest-xdist (``--dist loadfile``) hands out whole files in this order: a long file that came
    last would run alone while the other worker had nothing left to do."""
    try:
        with open(DURATIONS, encoding="utf-8") as f:
            seconds = json.load(f)
    except (OSError, ValueError):
        return
    first: dict[str, int] = {}
    for i, item in enumerate(items):
        first.setdefault(item.nodeid.split("::")[0], i)
    items.sort(
        key=lambda item: (-seconds.get(item.nodeid.split("::")[0], 0.0), first[item.nodeid.split("::")[0]])
    )


@pytest.fixture(autouse=True)
def _close_log_files_of_the_test() -> Iterator[None]:
    """A test that ran a training or a tool in this process (``default_setup``) leaves
    setup_logger's handlers on the "fastreid" logger: a file handler pointing into its tmp_path,
    which is deleted when the test passes, and a console handler writing to the test's captured
    stdout, which is closed when the test ends. Later tests' log lines must go to neither: close
    and remove them."""
    yield
    _drop_setup_logger_handlers()


def _drop_setup_logger_handlers() -> None:
    loggers = [x for x in list(logging.root.manager.loggerDict.values()) if isinstance(x, logging.Logger)]
    for logger in loggers:
        for handler in [h for h in logger.handlers if getattr(h, "_fastreid_setup_logger", False)]:
            logger.removeHandler(handler)
            handler.close()


@dataclass
class ToolResult:
    """What a command-line tool run in this process did: its exit code and what it printed."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def stderr_lines(self) -> list[str]:
        """The non-empty lines of stderr, progress bars left out (tqdm redraws its bar on stderr)."""
        return [x for x in self.stderr.splitlines() if x.strip() and not _PROGRESS_BAR.search(x)]


_PROGRESS_BAR = re.compile(r"\d+(\.\d+)?(it/s|s/it)\]")


#: The loggers setup_logger configures for the tools (fastreid/engine/defaults.py, fastreid/cli).
_TOOL_LOGGERS = ("fastreid", "fvcore")


@contextmanager
def _fresh_process_logging() -> Iterator[None]:
    """A fresh interpreter's logging while a tool runs in the test's process: no handlers on the
    root logger nor on the tools' loggers, which propagate, at level NOTSET; the old state comes
    back afterwards. In a fresh interpreter a warning logged before the tool sets up its logger
    reaches stderr (logging's last resort); in pytest the root logger holds pytest's capture
    handlers, and a tool run earlier left the "fastreid" logger not propagating, so the same
    warning went to pytest's log capture or to stderr depending on which tests ran before."""
    root = logging.getLogger()
    loggers = [root, *(logging.getLogger(name) for name in _TOOL_LOGGERS)]
    saved = [(x.handlers[:], x.propagate, x.level) for x in loggers]
    for logger in loggers:
        del logger.handlers[:]
        if logger is not root:
            logger.propagate = True
            logger.setLevel(logging.NOTSET)  # setLevel: clears the loggers' cached levels
    try:
        yield
    finally:
        for logger, (handlers, propagate, level) in zip(loggers, saved):
            logger.handlers[:] = handlers
            logger.propagate = propagate
            logger.setLevel(level)


@pytest.fixture
def run_tool(capsys) -> Callable[..., ToolResult]:
    """``run_tool(run, *argv, env={...})``: a console script's ``run(argv)`` called in this
    process, as its entry point calls it (exit code, stdout and stderr captured), instead of a new
    interpreter that imports torch again. For tests of what the tool does, not of the process
    boundary (signals, spawn, exit of a real process: those keep a subprocess). It runs with a fresh
    interpreter's logging; the environment, ``sys.argv``, torch's thread count, the logging state
    and the process-wide checkpoint trust are put back afterwards."""

    def call(
        run: Callable[[list[str]], int], *argv: Any, env: Optional[dict[str, str]] = None, script: str = ""
    ) -> ToolResult:
        """``script``: the file the command line would run (e.g. tools/train_net.py): ``sys.argv``
        and ``sys.orig_argv`` say so while ``run`` runs, as in that script's own process (the
        resume command a tool prints is built from them)."""
        import torch

        from fastreid.utils.safe_load import checkpoint_trusted, set_checkpoint_trust

        saved_env, threads = dict(os.environ), torch.get_num_threads()
        saved_argv = sys.argv, getattr(sys, "orig_argv", None)
        if script:
            sys.argv = [script, *map(str, argv)]
            sys.orig_argv = [sys.executable, script, *map(str, argv)]
        # the tool's thread decision keeps this worker's share of the cores (a tool otherwise takes
        # them all, as its own process would)
        os.environ.update({"OMP_NUM_THREADS": str(threads), **(env or {})})
        trusted = checkpoint_trusted()  # the job setup sets it from MODEL.TRUST_CHECKPOINT
        capsys.readouterr()  # what the test printed before is not the tool's
        try:
            try:
                with _fresh_process_logging():
                    code = run([str(a) for a in argv])
            except SystemExit as e:  # argparse's usage errors exit 2; sys.exit(n) in a tool
                code = e.code if isinstance(e.code, int) else int(e.code is not None)
            out = capsys.readouterr()
        finally:
            set_checkpoint_trust(trusted)  # a later test's load must not inherit --trust-checkpoint
            sys.argv = saved_argv[0]
            if saved_argv[1] is not None:
                sys.orig_argv = saved_argv[1]
            os.environ.clear()
            os.environ.update(saved_env)
            torch.set_num_threads(threads)
            _drop_setup_logger_handlers()
        return ToolResult(int(code), out.out, out.err)

    return call


@pytest.fixture
def fr_log(caplog):
    """caplog that also sees the "fastreid" logger when setup_logger() stopped its propagation."""
    logger = logging.getLogger("fastreid")
    old_level = logger.level
    logger.addHandler(caplog.handler)
    logger.setLevel(logging.INFO)
    caplog.handler.setLevel(logging.INFO)
    yield caplog
    logger.removeHandler(caplog.handler)
    logger.setLevel(old_level)


@pytest.fixture(scope="session", autouse=True)
def _torch_threads_per_xdist_worker() -> Iterator[None]:
    """Under pytest-xdist, each worker's torch gets its share of the cores (one thread at least):
    two workers with two threads each on a 2-core machine oversubscribe it (measured 10 % slower on
    the model tests); ``make test`` runs one worker more than the cores, each on one thread.
    The processes a test starts get the same share (``OMP_NUM_THREADS``, which the package's thread
    policy follows) unless the caller set it."""
    import torch

    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    threads, omp = torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")
    if workers > 1:
        share = max(1, available_cpus() // workers)
        torch.set_num_threads(share)
        os.environ.setdefault("OMP_NUM_THREADS", str(share))
    yield
    torch.set_num_threads(threads)
    if omp is None:
        os.environ.pop("OMP_NUM_THREADS", None)


@pytest.fixture(scope="module")
def one_torch_thread() -> Iterator[None]:
    """torch on one thread for a module's tests (restored after): tiny models run faster without
    OpenMP hand-offs, most of all on a machine shared with other test processes."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def tiny_resnet18_opts() -> tuple:
    """``cfg.merge_from_list`` options for a small, randomly initialised ResNet-18 on the CPU that reads
    64x32 images in the main process: what the training, evaluation and inference tests build."""
    return (
        "MODEL.DEVICE",
        "cpu",
        "MODEL.BACKBONE.DEPTH",
        "18x",
        "MODEL.BACKBONE.FEAT_DIM",
        512,
        "MODEL.BACKBONE.PRETRAIN",
        False,
        "INPUT.SIZE_TRAIN",
        [64, 32],
        "INPUT.SIZE_TEST",
        [64, 32],
        "DATALOADER.NUM_WORKERS",
        0,
    )


def _tree_fingerprint(root: str) -> list[tuple[str, int, int]]:
    """(relative path, size, mtime in ns) of every file and folder under root, sorted."""
    entries = []
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            info = os.lstat(path)
            entries.append((os.path.relpath(path, root), info.st_size, info.st_mtime_ns))
    return sorted(entries)


@pytest.fixture(scope="session")
def synthetic_market_root(tmp_path_factory) -> Iterator[str]:
    """A datasets root holding the small synthetic Market-1501 (``SyntheticSpec.small(seed=3)``),
    written once per session and shared by every test folder; point FASTREID_DATASETS at it.

    Read-only by contract: a test that changes the tree (renames, corrupts or adds files, or writes
    a decoded cache into it) copies it first or generates its own. The tree is fingerprinted when
    written and checked at the end of the session, so a test that mutates it fails loudly instead
    of silently changing what later tests see.
    """
    from fastreid.data.synthetic.persons import SyntheticSpec, generate_market1501

    root = str(tmp_path_factory.mktemp("synthetic_market"))
    generate_market1501(root, SyntheticSpec.small(seed=3))
    before = _tree_fingerprint(root)
    yield root
    assert _tree_fingerprint(root) == before, f"a test changed the shared synthetic data set under {root}"
