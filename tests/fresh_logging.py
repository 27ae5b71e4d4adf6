"""The logging state of a fresh interpreter around a tool run in the test's process.

In a fresh interpreter the root logger has no handlers, so a warning that a tool logs before it
sets up its own logger (e.g. "Config file ... is not in ...; using the one shipped with fastreid")
reaches stderr through logging's last-resort handler: the user sees it. In pytest the root logger
holds pytest's capture handlers, a tool run earlier in the process has left the "fastreid" logger
not propagating (``setup_logger``), and pytest attaches its handlers to such a logger too at the
start of each test: the same warning goes to pytest's log capture or to stderr depending on which
tests ran before. :func:`fresh_process_logging` gives the run a fresh interpreter's state and
puts the old one back afterwards.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

# the loggers setup_logger configures for the tools (fastreid/engine/defaults.py, fastreid/cli)
TOOL_LOGGERS = ("fastreid", "fvcore")


@contextmanager
def fresh_process_logging() -> Iterator[None]:
    """No handlers on the root logger nor on the tools' loggers, which propagate, at level NOTSET,
    as before any setup."""
    root = logging.getLogger()
    loggers = [root, *(logging.getLogger(name) for name in TOOL_LOGGERS)]
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


def run_as_in_a_fresh_process(run_tool: Callable[..., Any], run: Callable, *argv: Any, **kwargs: Any) -> Any:
    """``run_tool(run, *argv, **kwargs)`` (tests/conftest.py) in :func:`fresh_process_logging`."""
    with fresh_process_logging():
        return run_tool(run, *argv, **kwargs)
