"""The training command of the task families' end-to-end tests, in the test's process (a module of
its own: test files import it by name, tests/ being on the path)."""

from __future__ import annotations

from typing import Callable

from fastreid.cli import train


def train_log(run_tool: Callable, datasets_root: str, *argv) -> str:
    """What ``fastreid-train *argv`` (``tools/train_net.py``: :func:`fastreid.cli.train.run`) printed,
    run through the ``run_tool`` fixture with ``FASTREID_DATASETS=datasets_root``; fails the test
    with the end of that output when it does not exit 0."""
    done = run_tool(train.run, *argv, env={"FASTREID_DATASETS": str(datasets_root)})
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-3000:]
    return log
