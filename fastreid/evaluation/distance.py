"""Distances for evaluation: re-exported from :mod:`fastreid.utils.compute_dist` (upstream's path) and
:mod:`fastreid.utils.pairwise`, where the arithmetic lives so that ``utils`` never imports ``evaluation``."""

from fastreid.utils.compute_dist import build_dist
from fastreid.utils.pairwise import (
    METRICS,
    as_float_tensor,
    check_metric,
    default_chunk_rows,
    iter_dist_chunks,
)

__all__ = [
    "METRICS",
    "as_float_tensor",
    "build_dist",
    "check_metric",
    "default_chunk_rows",
    "iter_dist_chunks",
]
