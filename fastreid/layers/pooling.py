"""Global pooling layers selected by ``MODEL.HEADS.POOL_LAYER`` (upstream FastReID's names).

Each maps N x C x H x W to N x C x 1 x 1. Only ``GeneralizedMeanPoolingP`` has a state-dict
entry: its learnable exponent ``p`` (shape [1]). As upstream's, every constructor accepts and
ignores extra arguments, so a head can build any of them the same way.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "Identity",
    "Flatten",
    "GlobalAvgPool",
    "GlobalMaxPool",
    "GeneralizedMeanPooling",
    "GeneralizedMeanPoolingP",
    "FastGlobalAvgPool",
    "AdaptiveAvgMaxPool",
    "ClipGlobalAvgPool",
    "POOL_LAYERS",
    "build_pooling",
]


class Identity(nn.Module):
    """No pooling (the backbone already returns N x C x 1 x 1)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


class Flatten(nn.Module):
    """All of C x H x W as channels of a N x (C*H*W) x 1 x 1 tensor."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(x.size(0), -1, 1, 1)


class GlobalAvgPool(nn.AdaptiveAvgPool2d):
    def __init__(self, output_size: int = 1, *args: object, **kwargs: object) -> None:
        super().__init__(output_size)


class GlobalMaxPool(nn.AdaptiveMaxPool2d):
    def __init__(self, output_size: int = 1, *args: object, **kwargs: object) -> None:
        super().__init__(output_size)


class FastGlobalAvgPool(nn.Module):
    """Mean over H x W through a view (no pooling kernel); N x C with ``flatten``."""

    def __init__(self, flatten: bool = False, *args: object, **kwargs: object) -> None:
        super().__init__()
        self.flatten = flatten

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c = x.shape[:2]
        mean = x.reshape(n, c, -1).mean(-1)
        return mean if self.flatten else mean.view(n, c, 1, 1)


class GeneralizedMeanPooling(nn.Module):
    """GeM pooling with a fixed exponent: ``mean(clamp(x, eps) ** p) ** (1 / p)``.

    p = 1 is average pooling; p -> infinity tends to max pooling.
    """

    def __init__(
        self,
        norm: float = 3,
        output_size: int | tuple[int, int] = (1, 1),
        eps: float = 1e-6,
        *args: object,
        **kwargs: object,
    ) -> None:
        super().__init__()
        if norm <= 0:
            raise ValueError(f"GeM pooling needs a positive exponent, got {norm}")
        self.p: float | torch.Tensor = float(norm)
        self.output_size = output_size
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.clamp(min=self.eps).pow(self.p)
        return F.adaptive_avg_pool2d(x, self.output_size).pow(1.0 / self.p)

    def extra_repr(self) -> str:
        p = self.p.item() if isinstance(self.p, torch.Tensor) else self.p
        return f"p={p:.4g}, output_size={self.output_size}"


class GeneralizedMeanPoolingP(GeneralizedMeanPooling):
    """GeM pooling whose exponent ``p`` is learnt (state-dict key ``p``)."""

    def __init__(
        self,
        norm: float = 3,
        output_size: int | tuple[int, int] = (1, 1),
        eps: float = 1e-6,
        *args: object,
        **kwargs: object,
    ) -> None:
        super().__init__(norm, output_size, eps)
        self.p = nn.Parameter(torch.ones(1) * norm)


class AdaptiveAvgMaxPool(nn.Module):
    """Sum of global average and global max pooling."""

    def __init__(self, output_size: int = 1, *args: object, **kwargs: object) -> None:
        super().__init__()
        self.gap = FastGlobalAvgPool()
        self.gmp = GlobalMaxPool(output_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gap(x) + self.gmp(x)


class ClipGlobalAvgPool(nn.Module):
    """Global average pooling clamped to [0, 1]."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__()
        self.avgpool = FastGlobalAvgPool()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(self.avgpool(x), min=0.0, max=1.0)


POOL_LAYERS: dict[str, type[nn.Module]] = {
    cls.__name__: cls
    for cls in (
        Identity,
        Flatten,
        GlobalAvgPool,
        GlobalMaxPool,
        GeneralizedMeanPooling,
        GeneralizedMeanPoolingP,
        FastGlobalAvgPool,
        AdaptiveAvgMaxPool,
        ClipGlobalAvgPool,
    )
}
# Names used by older upstream configs.
_ALIASES = {
    "avgpool": "GlobalAvgPool",
    "maxpool": "GlobalMaxPool",
    "gempool": "GeneralizedMeanPooling",
    "gempoolp": "GeneralizedMeanPoolingP",
    "avgmaxpool": "AdaptiveAvgMaxPool",
    "fastavgpool": "FastGlobalAvgPool",
    "clipavgpool": "ClipGlobalAvgPool",
}


def build_pooling(name: str) -> nn.Module:
    """The pooling layer called ``name`` (upstream's class names; old lower-case names accepted)."""
    lookup = {key.lower(): key for key in POOL_LAYERS}
    key = lookup.get(name.lower()) or _ALIASES.get(name.lower())
    if key is None:
        raise ValueError(
            f"MODEL.HEADS.POOL_LAYER {name!r} is unknown; expected one of {', '.join(POOL_LAYERS)}"
        )
    return POOL_LAYERS[key]()
