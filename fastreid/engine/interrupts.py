"""Stopping a training run cleanly on SIGINT (Ctrl-C), SIGTERM (schedulers) and SIGUSR1 (SLURM's
``--signal=USR1@90`` preemption warning).

The first signal only raises a flag: the trainer finishes the current iteration, all ranks agree
to stop at the same one, a resumable checkpoint is written and the run ends with
:class:`TrainingInterruptedError` (exit code 128 + the signal number: 130, 143, 138). A second Ctrl-C
raises ``KeyboardInterrupt`` at once (nothing more is saved).
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType
from typing import Any, Callable, Optional, Union

from fastreid.utils.errors import UserError
from fastreid.utils.resume_hint import resume_command

__all__ = ["StopSignals", "TrainingInterruptedError", "resume_command"]

logger = logging.getLogger(__name__)

_HANDLED = ("SIGINT", "SIGTERM", "SIGUSR1")

_Handler = Union[Callable[[int, Optional[FrameType]], Any], int, None]


class TrainingInterruptedError(UserError):
    """A signal stopped training after a resumable checkpoint was written."""

    label = "Interrupted"

    def __init__(self, message: str, exit_code: int = 130) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class StopSignals:
    """Context manager: while active (in the main thread), SIGINT / SIGTERM / SIGUSR1 set
    :attr:`signum` instead of ending the process; the previous handlers come back on exit."""

    def __init__(self) -> None:
        self.signum: Optional[int] = None
        self._previous: dict[int, _Handler] = {}

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum is not None else ""

    @property
    def exit_code(self) -> int:
        return 128 + (self.signum or 0)

    def _handle(self, signum: int, frame: Optional[FrameType]) -> None:
        if self.signum is not None:
            if signum == signal.SIGINT:
                raise KeyboardInterrupt  # second Ctrl-C: stop now
            return  # schedulers repeat SIGTERM; the stop is already under way
        self.signum = signum
        logger.warning(
            f"{signal.Signals(signum).name} received: finishing the current iteration, then saving a "
            "checkpoint to resume from (press Ctrl-C again to stop at once without saving)"
        )

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is not threading.main_thread():
            return self  # signal handlers can only be set in the main thread
        for name in _HANDLED:
            sig = getattr(signal, name, None)
            if sig is None:  # SIGUSR1 does not exist on Windows
                continue
            self._previous[sig] = signal.getsignal(sig)
            signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        self._previous.clear()
