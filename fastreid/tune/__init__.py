"""Hyper-parameter search on Ray Tune (the 'tune' extra): a YAML search space over config keys
(:mod:`.space`), trials that are training runs of this project (:mod:`.trial`), the search and
its results (:mod:`.search`). ``fastreid-tune`` is its command line."""

from .search import SearchOptions, SearchResult, run_search
from .space import SearchSpace, SearchSpaceError, load_search_space

__all__ = [
    "SearchOptions",
    "SearchResult",
    "SearchSpace",
    "SearchSpaceError",
    "load_search_space",
    "run_search",
]
