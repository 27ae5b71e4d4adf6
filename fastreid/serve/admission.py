"""How many requests of one kind the server takes in at once: up to ``capacity`` are admitted
(working, or waiting their turn); one more is refused at once with 503 and a ``Retry-After`` that
estimates when a place frees up, instead of waiting unboundedly or being cut off by the HTTP
server. Used from the event loop's thread only (no lock: nothing awaits between the check and the
count)."""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Admission", "OverloadedError"]

#: Completions remembered for the rate behind Retry-After.
_RECENT = 64


class OverloadedError(Exception):
    """The server has no place left for this request; ``retry_after``: seconds to wait."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after


class Admission:
    """At most ``capacity`` requests of one kind (``what``) in the server at once."""

    def __init__(self, capacity: int, what: str) -> None:
        if capacity < 1:
            raise ValueError(f"the capacity for {what} must be at least 1, got {capacity}")
        self.capacity = int(capacity)
        self.what = what
        self.active = 0
        self.refused = 0
        self._done: collections.deque[float] = collections.deque(maxlen=_RECENT)

    def retry_after(self) -> int:
        """Seconds the server needs, at its recent rate of completions, to answer half of the
        requests it holds (1 to 60): a retry then finds places free."""
        now = time.monotonic()
        if len(self._done) < 2 or now - self._done[0] <= 0:
            return 1
        rate = len(self._done) / (now - self._done[0])
        return max(1, min(60, math.ceil(self.active / 2 / rate)))

    @contextmanager
    def admit(self) -> Iterator[None]:
        """Hold one place for the block; :class:`OverloadedError` when none is left."""
        if self.active >= self.capacity:
            self.refused += 1
            raise OverloadedError(
                f"The server is busy: {self.active} {self.what} in progress or waiting (the limit); "
                "try again shortly",
                self.retry_after(),
            )
        self.active += 1
        try:
            yield
        finally:
            self.active -= 1
            self._done.append(time.monotonic())
