"""Telling which training process was lost when a collective fails.

When one process of a DDP run dies (killed, out of memory, its machine gone), the others fail in
their next collective with a transport error ("Connection closed by peer ..."), or, with NCCL,
after the process group's timeout (``--dist-timeout``). :class:`PeerHeartbeat` lets them name the
lost rank: every process bumps a counter in the process group's key-value store once a second
from a daemon thread; after a failure, a counter that stopped moving names a lost rank.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Optional

import torch.distributed as dist

from fastreid.utils import comm
from fastreid.utils.errors import UserError
from fastreid.utils.resume_hint import resume_command

__all__ = ["PeerHeartbeat", "PeerLostError", "is_peer_failure"]

logger = logging.getLogger(__name__)

_KEY = "fastreid/heartbeat/{}"


class PeerLostError(UserError):
    """Another process of the distributed run stopped; this one stops too."""


def is_peer_failure(error: BaseException) -> bool:
    """Whether ``error`` is a collective failing because another process went away."""
    if isinstance(error, (dist.DistBackendError, dist.DistNetworkError)):
        return True
    text = str(error)
    return isinstance(error, RuntimeError) and any(
        marker in text for marker in ("Connection closed by peer", "Connection reset by peer", "gloo", "NCCL")
    )


def _default_store() -> Optional[Any]:
    try:
        # a private torch helper: imported under the try that guards its absence
        from torch.distributed.distributed_c10d import _get_default_store

        return _get_default_store()
    except Exception:  # no process group, or a torch without this helper
        return None


class PeerHeartbeat:
    """Per-process heartbeat in the store; :meth:`lost_ranks` after a failure."""

    def __init__(self, period: float = 1.0) -> None:
        self.period = period
        self.rank = comm.get_rank()
        self.world_size = comm.get_world_size()
        self._store = _default_store() if self.world_size > 1 else None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> PeerHeartbeat:
        if self._store is None:
            return self
        self._thread = threading.Thread(target=self._beat, name="fastreid-heartbeat", daemon=True)
        self._thread.start()
        return self

    def _beat(self) -> None:
        assert self._store is not None  # start() runs this thread only with a store
        key = _KEY.format(self.rank)
        while not self._stop.is_set():
            try:
                self._store.add(key, 1)
            except Exception:
                return  # the store's host is gone; lost_ranks() says so
            self._stop.wait(self.period)

    def stop(self) -> None:
        self._stop.set()

    def _counters(self) -> Optional[list[int]]:
        try:
            assert self._store is not None  # callers check first; failure here means None too
            return [int(self._store.add(_KEY.format(r), 0)) for r in range(self.world_size)]
        except Exception:
            return None

    def lost_ranks(self) -> Optional[list[int]]:
        """Ranks whose heartbeat stopped (watched for three periods); None when the store itself
        is unreachable (its host, rank 0 or the rendezvous host, is gone)."""
        if self._store is None:
            return [r for r in range(self.world_size) if r != self.rank] if self.world_size == 2 else None
        first = self._counters()
        if first is None:
            return None
        time.sleep(3 * self.period)
        second = self._counters()
        if second is None:
            return None
        return [r for r in range(self.world_size) if r != self.rank and second[r] == first[r]]

    def error(self, cause: BaseException, iteration: int) -> PeerLostError:
        """The one-line error for a collective that failed at ``iteration``."""
        self.stop()
        lost = self.lost_ranks()
        if lost is None:
            who = "the process hosting the rendezvous store (rank 0 or the torchrun endpoint)"
        elif lost:
            who = ", ".join(f"rank {r}" for r in lost)
        else:
            who = "another process"
        first_line = " ".join(str(cause).split())[:200]
        return PeerLostError(
            f"Lost {who} of {self.world_size} at iteration {iteration + 1} ({first_line}); "
            f"rank {self.rank} stops too. Continue from the last checkpoint with: {resume_command()} "
            "(torchrun --max-restarts does that by itself)"
        )
