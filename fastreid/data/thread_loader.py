"""Thread workers; moved to :mod:`fastreid.data.loading.threads` (this import path stays)."""

from fastreid.data.loading.threads import THREAD_NAME_PREFIX, ThreadLoaderIter

__all__ = ["ThreadLoaderIter", "THREAD_NAME_PREFIX"]
