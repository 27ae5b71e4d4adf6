"""ResNet-18/34/50/101 backbones with IBN-a, non-local blocks, SE gates and a choice of norm.

Built from torchvision's ``BasicBlock``/``Bottleneck`` (stride on the 3x3 conv, keys
``convK``/``bnK``/``downsample.{0,1}``), arranged as upstream FastReID does, so the state dict
has upstream's keys and shapes:

- stem ``conv1``/``bn1`` then ``MaxPool2d(3, stride=2, ceil_mode=True)`` (upstream's pooling,
  not torchvision's padded one: the same weights then give the same features);
- ``layer1``..``layer4``; ``layer4``'s first block has stride ``LAST_STRIDE``;
- IBN-a (``WITH_IBN``) splits ``bn1`` of every block in layer1-3 into ``bn1.IN``/``bn1.BN``;
- non-local blocks (``WITH_NL``) ``NL_2.i``/``NL_3.i`` follow the last 2 blocks of layer2 and the
  last 3 (R50) or 9 (R101) blocks of layer3, with upstream's one inner channel unless
  ``NL_INTER_CHANNELS`` says ``half``.

``init_pretrained_weights(key)`` returns the published ImageNet weights upstream's keys name
("50x", "ibn_50x", "se_ibn_101x", ...), downloaded once into TORCH_HOME.
"""

from __future__ import annotations

import functools
import math
from collections import OrderedDict
from typing import Any, Union, cast

import torch
import torchvision.models as tvm
from torch import nn
from torchvision.models import resnet as tv_resnet

from fastreid.config import ConfigError
from fastreid.layers import IBN, SELayer, get_norm
from fastreid.layers.batch_norm import NormSpec
from fastreid.layers.non_local import NL_INTER_CHANNELS, Non_local

from .build import BACKBONE_REGISTRY
from .pretrained import load_pretrained_backbone, published_state_dict
from .pretrained_urls import pretrained_weights_for

__all__ = [
    "ResNet",
    "BasicBlock",
    "Bottleneck",
    "build_resnet_backbone",
    "init_pretrained_weights",
    "RESNET_DEPTHS",
]


class TorchvisionBlockMixin:
    """Mixed in before a torchvision residual block: its norms made by ``get_norm(bn_norm)``, IBN-a in
    place of its first norm (``with_ibn``) and an SE gate of ``reduction`` for the block's output
    (``with_se``; an identity otherwise). Other keyword arguments (ResNeXt's ``groups``,
    ``base_width``) go to the torchvision block."""

    expansion: int  # the torchvision block's

    def __init__(
        self,
        inplanes: int,
        planes: int,
        bn_norm: NormSpec = "BN",
        with_ibn: bool = False,
        with_se: bool = False,
        stride: int = 1,
        downsample: nn.Module | None = None,
        reduction: int = 16,
        norm_kwargs: dict | None = None,
        **block_kwargs: int,
    ) -> None:
        norm_kwargs = norm_kwargs or {}
        # The next class in the method resolution order is the torchvision block (untyped for mypy).
        cast(Any, super()).__init__(
            inplanes,
            planes,
            stride=stride,
            downsample=downsample,
            norm_layer=functools.partial(get_norm, bn_norm, **norm_kwargs),
            **block_kwargs,
        )
        if with_ibn:
            width = cast(Any, self).conv1.out_channels  # the torchvision block's first conv
            self.bn1 = IBN(width, bn_norm, **norm_kwargs)
        self.se = SELayer(planes * self.expansion, reduction) if with_se else nn.Identity()


class BasicBlock(TorchvisionBlockMixin, tv_resnet.BasicBlock):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.se(self.bn2(self.conv2(out)))
        return self.relu(out + identity)


class Bottleneck(TorchvisionBlockMixin, tv_resnet.Bottleneck):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.se(self.bn3(self.conv3(out)))
        return self.relu(out + identity)


Block = Union[type[BasicBlock], type[Bottleneck]]

# depth -> (block, blocks per stage, non-local blocks per stage)
RESNET_DEPTHS: dict[str, tuple[Block, list[int], list[int]]] = {
    "18x": (BasicBlock, [2, 2, 2, 2], [0, 0, 0, 0]),
    "34x": (BasicBlock, [3, 4, 6, 3], [0, 0, 0, 0]),
    "50x": (Bottleneck, [3, 4, 6, 3], [0, 2, 3, 0]),
    "101x": (Bottleneck, [3, 4, 23, 3], [0, 2, 9, 0]),
}
_TORCHVISION_WEIGHTS = {
    "18x": "ResNet18_Weights",
    "34x": "ResNet34_Weights",
    "50x": "ResNet50_Weights",
    "101x": "ResNet101_Weights",
}


def upstream_random_init(model: nn.Module) -> None:
    """Upstream's initialisation: conv ~ N(0, 2 / (k*k*out_channels)), norms weight 1 bias 0
    (ResNet's, also used by ResNeXt as upstream does)."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            n = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
            nn.init.normal_(m.weight, 0, math.sqrt(2.0 / n))
        elif isinstance(m, (nn.modules.batchnorm._BatchNorm, nn.InstanceNorm2d)) and m.affine:
            nn.init.constant_(m.weight, 1)
            nn.init.constant_(m.bias, 0)


class ResNet(nn.Module):
    def __init__(
        self,
        last_stride: int,
        bn_norm: NormSpec,
        with_ibn: bool,
        with_se: bool,
        with_nl: bool,
        block: Block,
        layers: list[int],
        non_layers: list[int],
        norm_kwargs: dict | None = None,
        nl_inter_channels: str = "upstream",
    ) -> None:
        super().__init__()
        self._norm_kwargs = norm_kwargs or {}
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = get_norm(bn_norm, 64, **self._norm_kwargs)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True)
        self.layer1 = self._make_layer(block, 64, layers[0], 1, bn_norm, with_ibn, with_se)
        self.layer2 = self._make_layer(block, 128, layers[1], 2, bn_norm, with_ibn, with_se)
        self.layer3 = self._make_layer(block, 256, layers[2], 2, bn_norm, with_ibn, with_se)
        self.layer4 = self._make_layer(block, 512, layers[3], last_stride, bn_norm, False, with_se)
        self.out_channels = 512 * block.expansion
        self.random_init()

        # Non-local blocks NL_{stage} follow the last ``non_layers[i]`` blocks of each stage; the
        # lists are empty without WITH_NL (no state-dict keys). ``_nl_first[i]``: index of the first
        # block of stage i + 1 followed by one. Plain ints and module lists keep this scriptable.
        self._nl_first: list[int] = []
        for stage, (count, n_blocks) in enumerate(zip(non_layers, layers)):
            count = count if with_nl else 0
            channels = (64 << stage) * block.expansion
            setattr(
                self,
                f"NL_{stage + 1}",
                nn.ModuleList(
                    Non_local(channels, bn_norm, inter_channels=nl_inter_channels, **self._norm_kwargs)
                    for _ in range(count)
                ),
            )
            self._nl_first.append(n_blocks - count)

    def _make_layer(
        self,
        block: Block,
        planes: int,
        blocks: int,
        stride: int,
        bn_norm: NormSpec,
        with_ibn: bool,
        with_se: bool,
    ) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes * block.expansion, kernel_size=1, stride=stride, bias=False),
                get_norm(bn_norm, planes * block.expansion, **self._norm_kwargs),
            )
        layers = [
            block(
                self.inplanes,
                planes,
                bn_norm,
                with_ibn,
                with_se,
                stride,
                downsample,
                norm_kwargs=self._norm_kwargs,
            )
        ]
        self.inplanes = planes * block.expansion
        layers += [
            block(self.inplanes, planes, bn_norm, with_ibn, with_se, norm_kwargs=self._norm_kwargs)
            for _ in range(1, blocks)
        ]
        return nn.Sequential(*layers)

    def random_init(self) -> None:
        """See :func:`upstream_random_init`."""
        upstream_random_init(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        # One loop per stage, written out: TorchScript cannot pass modules to a helper or index a
        # ModuleList with a computed number, but it unrolls loops over module containers.
        for i, blk in enumerate(self.layer1):
            x = blk(x)
            for k, non_local in enumerate(self.NL_1):
                if i == self._nl_first[0] + k:
                    x = non_local(x)
        for i, blk in enumerate(self.layer2):
            x = blk(x)
            for k, non_local in enumerate(self.NL_2):
                if i == self._nl_first[1] + k:
                    x = non_local(x)
        for i, blk in enumerate(self.layer3):
            x = blk(x)
            for k, non_local in enumerate(self.NL_3):
                if i == self._nl_first[2] + k:
                    x = non_local(x)
        for i, blk in enumerate(self.layer4):
            x = blk(x)
            for k, non_local in enumerate(self.NL_4):
                if i == self._nl_first[3] + k:
                    x = non_local(x)
        return x


def init_pretrained_weights(key: str) -> OrderedDict[str, torch.Tensor]:
    """The published ImageNet weights for upstream's ``key`` ("18x".."101x", "ibn_18x".."ibn_101x",
    "se_ibn_101x") as a state dict (classifier included), downloaded once into TORCH_HOME:
    torchvision's for plain ResNets, IBN-Net's release for the IBN variants."""
    depth = key.rsplit("_", 1)[-1]
    tv_weights = None
    if key == depth and depth in _TORCHVISION_WEIGHTS:
        tv_weights = getattr(tvm, _TORCHVISION_WEIGHTS[depth]).IMAGENET1K_V1
    return published_state_dict("resnet", key, f"ResNet {key}", tv_weights)


def normalize_depth(depth: object, supported: list[str]) -> str:
    """``50``, ``"50"`` and ``"50x"`` all mean "50x"."""
    key = str(depth).strip()
    if key.isdigit():
        key += "x"
    if key not in supported:
        raise ConfigError(
            f"MODEL.BACKBONE.DEPTH {depth!r} is not supported for this backbone; "
            f"expected one of {', '.join(supported)}"
        )
    return key


@BACKBONE_REGISTRY.register()
def build_resnet_backbone(cfg) -> ResNet:
    """ResNet from ``MODEL.BACKBONE.*`` (DEPTH, LAST_STRIDE, NORM, WITH_IBN/SE/NL, PRETRAIN[_PATH])."""
    bb = cfg.MODEL.BACKBONE
    depth = normalize_depth(bb.DEPTH, list(RESNET_DEPTHS))
    block, layers, non_layers = RESNET_DEPTHS[depth]
    norm_kwargs = {"num_splits": bb.NORM_SPLIT}
    if bb.NL_INTER_CHANNELS not in NL_INTER_CHANNELS:
        raise ConfigError(
            f"MODEL.BACKBONE.NL_INTER_CHANNELS {bb.NL_INTER_CHANNELS!r} is unknown; expected one of "
            f"{', '.join(NL_INTER_CHANNELS)}"
        )
    model = ResNet(
        bb.LAST_STRIDE,
        bb.NORM,
        bb.WITH_IBN,
        bb.WITH_SE,
        bb.WITH_NL,
        block,
        layers,
        non_layers,
        norm_kwargs,
        bb.NL_INTER_CHANNELS,
    )
    if bb.PRETRAIN:
        tv_weights = None
        if not (bb.WITH_IBN or bb.WITH_SE):
            tv_weights = getattr(tvm, _TORCHVISION_WEIGHTS[depth]).IMAGENET1K_V1
        variant = ("IBN-a " if bb.WITH_IBN else "") + ("SE-" if bb.WITH_SE else "") + f"ResNet-{depth[:-1]}"
        key = ("se_" if bb.WITH_SE else "") + ("ibn_" if bb.WITH_IBN else "") + depth
        load_pretrained_backbone(
            model, bb.PRETRAIN_PATH, tv_weights, variant, source=pretrained_weights_for("resnet", key)
        )
    return model
