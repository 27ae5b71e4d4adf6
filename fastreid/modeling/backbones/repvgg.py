"""RepVGG (Ding et al., 2021) with upstream FastReID's keys and DEPTH names (A0..B3g4).

Training form: each block sums a 3x3 conv+BN (``rbr_dense``), a 1x1 conv+BN (``rbr_1x1``) and,
where shapes allow, a BN of the input (``rbr_identity``), then a ReLU. ``deploy(model, True)`` (or
``model.deploy(True)``) fuses the three branches of every block into one 3x3 conv with bias
(``fused_weight``, ``fused_bias``: upstream's deploy-form state dict) giving the same features
(eval-mode BN statistics) at a fraction of the cost; a deployed block cannot go back.

Upstream makes ``deploy`` a method of every ``nn.Sequential`` by patching torch's class; here
:func:`deploy` is a function that takes any module and patches nothing.
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

__all__ = [
    "RepVGG",
    "RepVGGBlock",
    "REPVGG_VARIANTS",
    "build_repvgg_backbone",
    "conv_bn",
    "deploy",
    "create_RepVGG_A0",
    "create_RepVGG_A1",
    "create_RepVGG_A2",
    "create_RepVGG_B0",
    "create_RepVGG_B1",
    "create_RepVGG_B1g2",
    "create_RepVGG_B1g4",
    "create_RepVGG_B2",
    "create_RepVGG_B2g2",
    "create_RepVGG_B2g4",
    "create_RepVGG_B3",
    "create_RepVGG_B3g2",
    "create_RepVGG_B3g4",
]


def deploy(self: nn.Module, mode: bool = False) -> nn.Module:
    """Fuse every RepVGG block inside ``self`` (any module: a backbone, a stage, a whole model)
    into its single-conv inference form when ``mode`` is True; returns ``self``. ``mode`` False
    leaves training-form blocks as they are and refuses deployed ones."""
    for m in self.modules():
        if isinstance(m, RepVGGBlock):
            m.deploy(mode)
        elif isinstance(m, RepVGG):
            m.deploying = mode
    return self


def conv_bn(
    norm_type: NormSpec,
    in_channels: int,
    out_channels: int,
    kernel_size: int,
    stride: int,
    padding: int,
    groups: int = 1,
) -> nn.Sequential:
    """A bias-free conv (``conv``) followed by ``norm_type`` (``bn``)."""
    branch = nn.Sequential()
    branch.add_module(
        "conv", nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding, groups=groups, bias=False)
    )
    branch.add_module("bn", get_norm(norm_type, out_channels))
    return branch


def _fuse(kernel: torch.Tensor, norm: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    """``kernel`` followed by ``norm`` (eval statistics) as one conv's weight and bias."""
    bn = cast(nn.modules.batchnorm._BatchNorm, norm)  # get_norm builds BatchNorm variants
    assert bn.running_var is not None and bn.running_mean is not None
    scale = bn.weight / (bn.running_var + bn.eps).sqrt()
    return kernel * scale.reshape(-1, 1, 1, 1), bn.bias - bn.running_mean * scale


def _branch_parts(branch: nn.Module) -> tuple[torch.Tensor, nn.Module]:
    """The conv kernel and the norm of a branch built by :func:`conv_bn`."""
    return cast(nn.Conv2d, branch.conv).weight, cast(nn.Module, branch.bn)


class RepVGGBlock(nn.Module):
    """A 3x3 RepVGG block (``kernel_size`` 3 and ``padding`` 1 are the only sizes it supports)."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        norm_type: NormSpec,
        kernel_size: int,
        stride: int = 1,
        padding: int = 0,
        groups: int = 1,
    ) -> None:
        super().__init__()
        if kernel_size != 3 or padding != 1:
            raise ValueError(
                f"RepVGGBlock needs kernel_size 3 and padding 1, got {kernel_size} and {padding}"
            )
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride, self.padding, self.groups = kernel_size, stride, padding, groups
        self.deploying = False
        self.nonlinearity = nn.ReLU()
        self.fused_weight: nn.Parameter | None = None
        self.fused_bias: nn.Parameter | None = None
        self.rbr_identity = (
            get_norm(norm_type, in_channels) if in_channels == out_channels and stride == 1 else None
        )
        self.rbr_dense = conv_bn(norm_type, in_channels, out_channels, kernel_size, stride, padding, groups)
        self.rbr_1x1 = conv_bn(
            norm_type, in_channels, out_channels, 1, stride, padding - kernel_size // 2, groups
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.deploying:
            assert self.fused_weight is not None  # set by the switch to deployment
            return self.nonlinearity(
                F.conv2d(x, self.fused_weight, self.fused_bias, self.stride, self.padding, 1, self.groups)
            )
        out = self.rbr_dense(x) + self.rbr_1x1(x)
        if self.rbr_identity is not None:
            out = out + self.rbr_identity(x)
        return self.nonlinearity(out)

    @torch.no_grad()
    def get_equivalent_kernel_bias(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The 3x3 kernel and bias of one conv equal to the block's three branches (eval mode)."""
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
        weight, bias = self.get_equivalent_kernel_bias()
        self.fused_weight = nn.Parameter(weight)
        self.fused_bias = nn.Parameter(bias)
        del self.rbr_identity, self.rbr_1x1, self.rbr_dense
        self.rbr_identity = None
        self.deploying = True


class RepVGG(nn.Module):
    """Stages ``stage0``..``stage4`` of RepVGG blocks; ``num_blocks`` per stage 1-4, widths
    ``64, 128, 256, 512`` times ``width_multiplier``; ``override_groups_map`` gives the groups of
    blocks by their index (from 1, in order), the others have 1."""

    def __init__(
        self,
        last_stride: int,
        norm_type: NormSpec,
        num_blocks: list[int],
        width_multiplier: list[float] | None = None,
        override_groups_map: dict[int, int] | None = None,
    ) -> None:
        super().__init__()
        if width_multiplier is None or len(width_multiplier) != 4:
            raise ValueError(f"RepVGG needs 4 width multipliers, got {width_multiplier}")
        self.override_groups_map = override_groups_map or {}
        if 0 in self.override_groups_map:
            raise ValueError("RepVGG's first block (index 0) cannot be grouped")
        self.deploying = False
        self.in_planes = min(64, int(64 * width_multiplier[0]))
        self.stage0 = RepVGGBlock(3, self.in_planes, norm_type, 3, stride=2, padding=1)
        self.cur_layer_idx = 1
        widths = [int(c * w) for c, w in zip((64, 128, 256, 512), width_multiplier)]
        strides = (2, 2, 2, last_stride)
        for i, (width, blocks, stride) in enumerate(zip(widths, num_blocks, strides), start=1):
            setattr(self, f"stage{i}", self._make_stage(width, norm_type, blocks, stride))
        self.out_channels = widths[-1]

    def _make_stage(self, planes: int, norm_type: NormSpec, num_blocks: int, stride: int) -> nn.Sequential:
        layers = []
        for s in [stride] + [1] * (num_blocks - 1):
            groups = self.override_groups_map.get(self.cur_layer_idx, 1)
            layers.append(RepVGGBlock(self.in_planes, planes, norm_type, 3, s, 1, groups))
            self.in_planes = planes
            self.cur_layer_idx += 1
        return nn.Sequential(*layers)

    def deploy(self, mode: bool = False) -> RepVGG:
        """Fuse every block (``mode=True``) for inference; returns the model."""
        return cast(RepVGG, deploy(self, mode))

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


def _create(variant: str, last_stride: int, norm_type: NormSpec) -> RepVGG:
    blocks, widths, groups = REPVGG_VARIANTS[variant]
    groups_map = dict.fromkeys(_GROUPED_LAYERS, groups) if groups > 1 else None
    return RepVGG(last_stride, norm_type, blocks, widths, groups_map)


def create_RepVGG_A0(last_stride: int, norm_type: NormSpec) -> RepVGG:
    return _create("A0", last_stride, norm_type)


def create_RepVGG_A1(last_stride: int, norm_type: NormSpec) -> RepVGG:
    return _create("A1", last_stride, norm_type)


def create_RepVGG_A2(last_stride: int, norm_type: NormSpec) -> RepVGG:
    return _create("A2", last_stride, norm_type)


def create_RepVGG_B0(last_stride: int, norm_type: NormSpec) -> RepVGG:
    return _create("B0", last_stride, norm_type)


def create_RepVGG_B1(last_stride: int, norm_type: NormSpec) -> RepVGG:
    return _create("B1", last_stride, norm_type)


def create_RepVGG_B1g2(last_stride: int, norm_type: NormSpec) -> RepVGG:
    return _create("B1g2", last_stride, norm_type)


def create_RepVGG_B1g4(last_stride: int, norm_type: NormSpec) -> RepVGG:
    return _create("B1g4", last_stride, norm_type)


def create_RepVGG_B2(last_stride: int, norm_type: NormSpec) -> RepVGG:
    return _create("B2", last_stride, norm_type)


def create_RepVGG_B2g2(last_stride: int, norm_type: NormSpec) -> RepVGG:
    return _create("B2g2", last_stride, norm_type)


def create_RepVGG_B2g4(last_stride: int, norm_type: NormSpec) -> RepVGG:
    return _create("B2g4", last_stride, norm_type)


def create_RepVGG_B3(last_stride: int, norm_type: NormSpec) -> RepVGG:
    return _create("B3", last_stride, norm_type)


def create_RepVGG_B3g2(last_stride: int, norm_type: NormSpec) -> RepVGG:
    return _create("B3g2", last_stride, norm_type)


def create_RepVGG_B3g4(last_stride: int, norm_type: NormSpec) -> RepVGG:
    return _create("B3g4", last_stride, norm_type)


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
    model = _create(depth, bb.LAST_STRIDE, bb.NORM)
    if bb.PRETRAIN:
        load_pretrained_backbone(model, bb.PRETRAIN_PATH, None, f"RepVGG-{depth}")
    return model
