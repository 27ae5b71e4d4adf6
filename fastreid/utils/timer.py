"""Upstream FastReID's ``fastreid.utils.timer``: ``Timer``, a pausable stopwatch (fvcore's class)."""

from fvcore.common.timer import Timer

__all__ = ["Timer"]
