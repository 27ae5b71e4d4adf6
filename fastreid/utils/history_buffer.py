"""Upstream FastReID's ``fastreid.utils.history_buffer``: ``HistoryBuffer``, the scalar history
with median / average over windows that the event storage keeps (fvcore's class)."""

from fvcore.common.history_buffer import HistoryBuffer

__all__ = ["HistoryBuffer"]
