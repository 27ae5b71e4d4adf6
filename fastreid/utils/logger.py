"""Logging: rank-aware, coloured on a terminal, mirrored to a file under OUTPUT_DIR."""

from __future__ import annotations

import logging
import os
import sys
import time
from collections import Counter

from termcolor import colored

__all__ = ["setup_logger", "log_first_n", "log_every_n", "log_every_n_seconds"]


class _ColorfulFormatter(logging.Formatter):
    def __init__(self, *args, root_name: str, abbrev_name: str, **kwargs):
        super().__init__(*args, **kwargs)
        self._root_name = root_name + "."
        self._abbrev_name = abbrev_name + "." if abbrev_name else ""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.name = record.name.replace(self._root_name, self._abbrev_name)
        log = super().formatMessage(record)
        if record.levelno == logging.WARNING:
            prefix = colored("WARNING", "red", attrs=["blink"])
        elif record.levelno >= logging.ERROR:
            prefix = colored("ERROR", "red", attrs=["blink", "underline"])
        else:
            return log
        return prefix + " " + log


_OWNED = "_fastreid_setup_logger"  # marks the handlers setup_logger installed


def setup_logger(
    output: str | None = None,
    distributed_rank: int = 0,
    *,
    color: bool = True,
    name: str = "fastreid",
    abbrev_name: str | None = None,
    level: int = logging.DEBUG,
) -> logging.Logger:
    """Set up the ``name`` logger.

    Rank 0 logs INFO and above to stdout (coloured when stdout is a terminal); other ranks log
    only to their file. With ``output`` (a folder, or a file ending in .txt/.log) every rank
    writes a file; ranks other than 0 get a ``.rankN`` suffix.

    The handlers an earlier call installed on this logger are removed (and their files closed)
    first: a second run in the same process (a notebook, a Ray worker running trial after trial)
    logs to its own folder only, not also into the earlier runs' ``log.txt``, and each line reaches
    stdout once. Handlers added by other code are left alone.
    """
    logger = logging.getLogger(name)
    logger.setLevel(level)
    logger.propagate = False
    for old in [h for h in logger.handlers if getattr(h, _OWNED, False)]:
        logger.removeHandler(old)
        old.close()
    if abbrev_name is None:
        abbrev_name = "fr" if name == "fastreid" else name

    plain = logging.Formatter("[%(asctime)s] %(name)s %(levelname)s: %(message)s", datefmt="%m/%d %H:%M:%S")
    if distributed_rank == 0:
        handler = logging.StreamHandler(stream=sys.stdout)
        handler.setLevel(logging.INFO)
        if color and sys.stdout.isatty():
            handler.setFormatter(
                _ColorfulFormatter(
                    colored("[%(asctime)s %(name)s]: ", "green") + "%(message)s",
                    datefmt="%m/%d %H:%M:%S",
                    root_name=name,
                    abbrev_name=str(abbrev_name),
                )
            )
        else:
            handler.setFormatter(plain)
        setattr(handler, _OWNED, True)
        logger.addHandler(handler)

    if output is not None:
        if output.endswith((".txt", ".log")):
            filename = output
        else:
            filename = os.path.join(output, "log.txt")
        if distributed_rank > 0:
            filename = f"{filename}.rank{distributed_rank}"
        os.makedirs(os.path.dirname(os.path.abspath(filename)), exist_ok=True)
        file_handler = logging.FileHandler(filename, encoding="utf-8")
        file_handler.setLevel(logging.DEBUG)
        file_handler.setFormatter(plain)
        setattr(file_handler, _OWNED, True)
        logger.addHandler(file_handler)
    return logger


_LOG_COUNTER: Counter = Counter()
_LOG_TIMER: dict = {}


def _caller_key() -> tuple:
    frame = sys._getframe(2)
    return frame.f_code.co_filename, frame.f_lineno


def log_first_n(lvl: int, msg: str, n: int = 1, *, name: str = "fastreid", key: str = "caller") -> None:
    """Log ``msg`` at most ``n`` times per call site (key="caller") or per message (key="message")."""
    hash_key = _caller_key() if key == "caller" else (msg,)
    _LOG_COUNTER[hash_key] += 1
    if _LOG_COUNTER[hash_key] <= n:
        logging.getLogger(name).log(lvl, msg)


def log_every_n(lvl: int, msg: str, n: int = 1, *, name: str | None = None) -> None:
    """Log ``msg`` on the 1st, (n+1)-th, (2n+1)-th ... call from the same call site (logger
    ``name``, default "fastreid")."""
    key = ("every_n", *_caller_key())
    _LOG_COUNTER[key] += 1
    if n == 1 or _LOG_COUNTER[key] % n == 1:
        logging.getLogger(name or "fastreid").log(lvl, msg)


def log_every_n_seconds(lvl: int, msg: str, n: float = 1.0, *, name: str = "fastreid") -> None:
    """Log ``msg`` at most once every ``n`` seconds per call site."""
    key = _caller_key()
    last = _LOG_TIMER.get(key)
    now = time.time()
    if last is None or now - last >= n:
        logging.getLogger(name).log(lvl, msg)
        _LOG_TIMER[key] = now
