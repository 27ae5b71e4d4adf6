"""One base class for errors caused by the user's input, and the wrapper every tool's main uses.

A :class:`UserError` is an error whose message is the whole story: it names the file, key, sample
or setting and says what to do. Tools print it on one line (``Name: message``) on stderr and keep
the traceback in the log file (DEBUG level); anything that is not a ``UserError`` is a bug and
keeps its traceback on the console.

Subclasses elsewhere in the package keep their historical bases too (``ConfigError`` is still a
``ValueError``, ``ImageReadError`` an ``OSError``), so ``except ValueError`` in user code keeps
working.
"""

from __future__ import annotations

import importlib
import logging
import re
import sys
from collections.abc import Callable

__all__ = ["CheckpointError", "DeviceError", "UserError", "run_tool", "user_error_from_traceback"]


class UserError(Exception):
    """An error in the input (config, data, weights, device, permissions), explained by its message.

    ``exit_code`` is what a tool exits with when this error ends it: 1, or 2 for config errors.
    """

    exit_code: int = 1
    #: What the one-line message starts with; the class name when empty.
    label: str = ""


class CheckpointError(UserError, ValueError):
    """A checkpoint that cannot be read, is not trusted, fails its checksum or does not fit the model."""


class DeviceError(UserError, ValueError):
    """A device string that names no device, or a device this machine cannot provide."""


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def run_tool(main: Callable[[], object], *, logger_name: str = "fastreid") -> int:
    """Run ``main()`` and turn its end into an exit code: the one error policy of every tool.

    - returns normally: 0 (or ``main``'s own int result when it returns one);
    - a :class:`UserError`: ``Name: message`` on one line on stderr, the traceback in the log
      (DEBUG), exit ``err.exit_code`` (1; 2 for config errors);
    - ``KeyboardInterrupt``: "Interrupted" on stderr, exit 130;
    - anything else propagates with its traceback: it is a bug, not a user error.
    """
    log = logging.getLogger(logger_name)
    try:
        result = main()
    except UserError as e:
        log.debug("Traceback of the error below:", exc_info=True)
        print(f"{e.label or type(e).__name__}: {_one_line(str(e))}", file=sys.stderr, flush=True)
        return int(getattr(e, "exit_code", 1))
    except KeyboardInterrupt:
        log.debug("Interrupted", exc_info=True)
        print("Interrupted", file=sys.stderr, flush=True)
        return 130
    return result if isinstance(result, int) and not isinstance(result, bool) else 0


_LAST_LINE = re.compile(r"^([A-Za-z_][\w.]*)\.([A-Za-z_]\w*): (.*)$")


def user_error_from_traceback(text: str) -> UserError | None:
    """The :class:`UserError` whose formatted traceback is ``text`` (e.g. what a spawned DDP
    process reports to its parent), rebuilt with its label, exit code and message; None when the
    traceback ends with any other exception (a bug, which keeps its traceback)."""
    lines = [line for line in str(text).splitlines() if line.strip()]
    match = _LAST_LINE.match(lines[-1].strip()) if lines else None
    if match is None:
        return None
    module_name, class_name, message = match.groups()
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError):
        return None
    if not (isinstance(cls, type) and issubclass(cls, UserError)):
        return None
    error = UserError(message)
    error.label = cls.label or cls.__name__
    error.exit_code = cls.exit_code
    return error
