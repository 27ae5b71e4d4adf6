"""RepVGG (Ding et al., 2021) with upstream FastReID's keys and DEPTH names (A0..B3g4).

Training form: each block sums a 3x3 conv+BN (``rbr_dense``), a 1x1 conv+BN (``rbr_1x1``) and,
where shapes allow, a BN of the input (``rbr_identity``), then a ReLU. ``deploy(True)`` fuses the
three branches into one 3x3 conv (``fused_weight``, ``fused_bias``) giving the same features
(eval-mode BN statistics) at a fraction of the cost; ``deploy(False)`` is not reversible.
"""

from __future__ import annotations

from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from fastreid.config import ConfigError
from fastreid.layers import get_norm
from fastreid.layers.batch_norm import NormSpec

from .build import BACKBONE_REGISTRY
from .pretrained import load_pretrained_backbone

__all__ = ["RepVGG", "RepVGGBlock", "REPVGG_VARIANTS", "build_repvgg_backbone"]


def _conv_bn(
    norm: NormSpec, cin: int, cout: int, kernel: int, stride: int, padding: int, groups: int
) -> nn.Sequential:
    branch = nn.Sequential()
    branch.add_module("conv", nn.Conv2d(cin, cout, kernel, stride, padding, groups=groups, bias=False))
    branch.add_module("bn", get_norm(norm, cout))
    return branch


def _fuse(kernel: torch.Tensor, norm: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    """``kernel`` followed by ``norm`` (eval statistics) as one conv's weight and bias."""
    bn = cast(nn.modules.batchnorm._BatchNorm, norm)  # get_norm builds BatchNorm variants
    assert bn.running_var is not None and bn.running_mean is not None
    scale = bn.weight / (bn.running_var + bn.eps).sqrt()
    return kernel * scale.reshape(-1, 1, 1, 1), bn.bias - bn.running_mean * scale


def _branch_parts(branch: nn.Sequential) -> tuple[torch.Tensor, nn.Module]:
    """The conv kernel and the norm of a branch built by ``_conv_bn``."""
    return cast(nn.Conv2d, branch.conv).weight, cast(nn.Module, branch.bn)


class RepVGGBlock(nn.Module):
    def __init__(
        self, in_channels: int, out_channels: int, norm: NormSpec = "BN", stride: int = 1, groups: int = 1
    ) -> None:
        super().__init__()
        self.in_channels, self.stride, self.groups = in_channels, stride, groups
        self.deploying = False
        self.nonlinearity = nn.ReLU()
        self.fused_weight: nn.Parameter | None = None
        self.fused_bias: nn.Parameter | None = None
        self.rbr_identity = (
            get_norm(norm, in_channels) if in_channels == out_channels and stride == 1 else None
        )
        self.rbr_dense = _conv_bn(norm, in_channels, out_channels, 3, stride, 1, groups)
        self.rbr_1x1 = _conv_bn(norm, in_channels, out_channels, 1, stride, 0, groups)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.deploying:
            assert self.fused_weight is not None  # set by the switch to deployment
            return self.nonlinearity(
                F.conv2d(x, self.fused_weight, self.fused_bias, self.stride, 1, 1, self.groups)
            )
        out = self.rbr_dense(x) + self.rbr_1x1(x)
        if self.rbr_identity is not None:
            out = out + self.rbr_identity(x)
        return self.nonlinearity(out)

    @torch.no_grad()
    def equivalent_kernel_bias(self) -> tuple[torch.Tensor, torch.Tensor]:
        dense_kernel, dense_norm = _branch_parts(self.rbr_dense)
        kernel_1x1, norm_1x1 = _branch_parts(self.rbr_1x1)
        weight, bias = _fuse(dense_kernel, dense_norm)
        w1, b1 = _fuse(F.pad(kernel_1x1, [1, 1, 1, 1]), norm_1x1)
        weight, bias = weight + w1, bias + b1
        if self.rbr_identity is not None:
            per_group = self.in_channels // self.groups
            identity = torch.zeros_like(weight)
            channels = torch.arange(self.in_channels)
            identity[channels, channels % per_group, 1, 1] = 1
            wi, bi = _fuse(identity, self.rbr_identity)
            weight, bias = weight + wi, bias + bi
        return weight, bias

    def deploy(self, mode: bool = False) -> None:
        """``True``: fuse the branches into ``fused_weight``/``fused_bias`` and drop them."""
        if not mode:
            if self.deploying:
                raise ValueError("A deployed RepVGG block cannot go back to its training form")
            return
        if self.deploying:
            return
        weight, bias = self.equivalent_kernel_bias()
        self.fused_weight = nn.Parameter(weight)
        self.fused_bias = nn.Parameter(bias)
        del self.rbr_identity, self.rbr_1x1, self.rbr_dense
        self.rbr_identity = None
        self.deploying = True


class RepVGG(nn.Module):
    def __init__(
        self,
        last_stride: int,
        norm: NormSpec,
        num_blocks: list[int],
        width_multiplier: list[float],
        groups_of_layer: dict[int, int] | None = None,
    ) -> None:
        super().__init__()
        groups_of_layer = groups_of_layer or {}
        self.in_planes = min(64, int(64 * width_multiplier[0]))
        self.stage0 = RepVGGBlock(3, self.in_planes, norm, stride=2)
        self._layer_index = 1
        widths = [int(c * w) for c, w in zip((64, 128, 256, 512), width_multiplier)]
        strides = (2, 2, 2, last_stride)
        for i, (width, blocks, stride) in enumerate(zip(widths, num_blocks, strides), start=1):
            setattr(self, f"stage{i}", self._make_stage(width, norm, blocks, stride, groups_of_layer))
        self.out_channels = widths[-1]

    def _make_stage(
        self, planes: int, norm: NormSpec, blocks: int, stride: int, groups_of_layer: dict[int, int]
    ):
        layers = []
        for s in [stride] + [1] * (blocks - 1):
            layers.append(
                RepVGGBlock(self.in_planes, planes, norm, s, groups_of_layer.get(self._layer_index, 1))
            )
            self.in_planes = planes
            self._layer_index += 1
        return nn.Sequential(*layers)

    def deploy(self, mode: bool = False) -> RepVGG:
        """Fuse every block (``mode=True``) for inference; returns the model."""
        for m in self.modules():
            if isinstance(m, RepVGGBlock):
                m.deploy(mode)
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i in range(5):
            x = getattr(self, f"stage{i}")(x)
        return x


_GROUPED_LAYERS = range(2, 27, 2)  # every second layer is grouped in the g2/g4 variants
# DEPTH -> (blocks per stage, width multipliers, groups of grouped layers)
REPVGG_VARIANTS: dict[str, tuple[list[int], list[float], int]] = {
    "A0": ([2, 4, 14, 1], [0.75, 0.75, 0.75, 2.5], 1),
    "A1": ([2, 4, 14, 1], [1, 1, 1, 2.5], 1),
    "A2": ([2, 4, 14, 1], [1.5, 1.5, 1.5, 2.75], 1),
    "B0": ([4, 6, 16, 1], [1, 1, 1, 2.5], 1),
    "B1": ([4, 6, 16, 1], [2, 2, 2, 4], 1),
    "B1g2": ([4, 6, 16, 1], [2, 2, 2, 4], 2),
    "B1g4": ([4, 6, 16, 1], [2, 2, 2, 4], 4),
    "B2": ([4, 6, 16, 1], [2.5, 2.5, 2.5, 5], 1),
    "B2g2": ([4, 6, 16, 1], [2.5, 2.5, 2.5, 5], 2),
    "B2g4": ([4, 6, 16, 1], [2.5, 2.5, 2.5, 5], 4),
    "B3": ([4, 6, 16, 1], [3, 3, 3, 5], 1),
    "B3g2": ([4, 6, 16, 1], [3, 3, 3, 5], 2),
    "B3g4": ([4, 6, 16, 1], [3, 3, 3, 5], 4),
}


@BACKBONE_REGISTRY.register()
def build_repvgg_backbone(cfg) -> RepVGG:
    """RepVGG from ``MODEL.BACKBONE.*`` (DEPTH A0..B3g4, LAST_STRIDE, NORM, PRETRAIN[_PATH])."""
    bb = cfg.MODEL.BACKBONE
    depth = str(bb.DEPTH)
    if depth not in REPVGG_VARIANTS:
        raise ConfigError(
            f"MODEL.BACKBONE.DEPTH {depth!r} is not a RepVGG variant; expected one of "
            f"{', '.join(REPVGG_VARIANTS)}"
        )
    blocks, widths, groups = REPVGG_VARIANTS[depth]
    groups_of_layer = dict.fromkeys(_GROUPED_LAYERS, groups) if groups > 1 else None
    model = RepVGG(bb.LAST_STRIDE, bb.NORM, blocks, widths, groups_of_layer)
    if bb.PRETRAIN:
        load_pretrained_backbone(model, bb.PRETRAIN_PATH, None, f"RepVGG-{depth}")
    return model
