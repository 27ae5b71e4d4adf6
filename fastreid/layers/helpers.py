"""Small helpers shared by layers and backbones: n-tuples of a size argument and channel rounding."""

from __future__ import annotations

import collections.abc
from typing import Any, Callable

__all__ = ["to_ntuple", "to_1tuple", "to_2tuple", "to_3tuple", "to_4tuple", "make_divisible"]


def to_ntuple(n: int) -> Callable[[Any], Any]:
    """A function that repeats a single value ``n`` times and leaves an iterable (a size already
    given per dimension) unchanged: ``to_ntuple(2)(3) == (3, 3)``, ``to_ntuple(2)((3, 4)) == (3, 4)``."""

    def parse(x: Any) -> Any:
        if isinstance(x, collections.abc.Iterable):
            return x
        return (x,) * n

    return parse


to_1tuple = to_ntuple(1)
to_2tuple = to_ntuple(2)
to_3tuple = to_ntuple(3)
to_4tuple = to_ntuple(4)


def make_divisible(v: float, divisor: int = 8, min_value: int | None = None) -> int:
    """``v`` rounded to the nearest multiple of ``divisor`` (at least ``min_value``, by default
    ``divisor``), one multiple higher when rounding would lose more than 10 % (MobileNet's rule)."""
    min_value = min_value or divisor
    rounded = max(min_value, int(v + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * v else rounded
