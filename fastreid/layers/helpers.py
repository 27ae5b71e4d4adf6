"""Small helpers of upstream FastReID's ``fastreid.layers.helpers``: n-tuples from scalars and
channel counts rounded to a divisor (MobileNet / EfficientNet widths)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Callable, Optional

__all__ = ["make_divisible", "to_1tuple", "to_2tuple", "to_3tuple", "to_4tuple", "to_ntuple"]


def _ntuple(n: int) -> Callable[[Any], tuple]:
    def parse(x: Any) -> tuple:
        if isinstance(x, Iterable) and not isinstance(x, str):
            return tuple(x)
        return (x,) * n

    return parse


to_1tuple = _ntuple(1)
to_2tuple = _ntuple(2)
to_3tuple = _ntuple(3)
to_4tuple = _ntuple(4)
to_ntuple = _ntuple


def make_divisible(v: float, divisor: int = 8, min_value: Optional[int] = None) -> int:
    """``v`` rounded to the nearest multiple of ``divisor`` (at least ``min_value``, default
    ``divisor``), never more than 10 % below ``v``."""
    min_value = min_value or divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v
