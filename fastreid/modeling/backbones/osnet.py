"""OSNet (Zhou et al., ICCV 2019): a light omni-scale backbone, fast enough for CPU training.

Widths x1_0, x0_75, x0_5, x0_25 (``MODEL.BACKBONE.DEPTH``); ``WITH_IBN`` gives OSNet-IBN
(instance norm in the stem and the first stage). Module names follow upstream FastReID (and
deep-person-reid), so their checkpoints load. The output has ``channels[3]`` channels (512 for
x1_0): set ``MODEL.BACKBONE.FEAT_DIM`` to it.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from fastreid.layers import get_norm
from fastreid.layers.batch_norm import NormSpec

from .build import BACKBONE_REGISTRY, backbone_norm
from .pretrained import load_pretrained_backbone, published_state_dict
from .pretrained_urls import pretrained_weights_for
from .resnet import normalize_depth

__all__ = [
    "OSNet",
    "OSBlock",
    "ConvLayer",
    "Conv1x1",
    "Conv1x1Linear",
    "Conv3x3",
    "LightConv3x3",
    "ChannelGate",
    "build_osnet_backbone",
    "init_pretrained_weights",
    "OSNET_WIDTHS",
]

OSNET_WIDTHS = {
    "x1_0": [64, 256, 384, 512],
    "x0_75": [48, 192, 288, 384],
    "x0_5": [32, 128, 192, 256],
    "x0_25": [16, 64, 96, 128],
}


class ConvLayer(nn.Module):
    """conv (k x k) + norm (affine InstanceNorm with ``IN``) + ReLU."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        bn_norm: NormSpec,
        stride: int = 1,
        padding: int = 0,
        groups: int = 1,
        IN: bool = False,
    ) -> None:
        super().__init__()
        self.conv = nn.Conv2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, bias=False, groups=groups
        )
        self.bn = nn.InstanceNorm2d(out_channels, affine=True) if IN else get_norm(bn_norm, out_channels)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.bn(self.conv(x)))


class Conv1x1(nn.Module):
    """1x1 conv + norm + ReLU."""

    def __init__(
        self, in_channels: int, out_channels: int, bn_norm: NormSpec, stride: int = 1, groups: int = 1
    ) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False, groups=groups)
        self.bn = get_norm(bn_norm, out_channels)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.bn(self.conv(x)))


class Conv1x1Linear(nn.Module):
    """1x1 conv + norm, no non-linearity."""

    def __init__(self, in_channels: int, out_channels: int, bn_norm: NormSpec, stride: int = 1) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False)
        self.bn = get_norm(bn_norm, out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.conv(x))


class Conv3x3(nn.Module):
    """3x3 conv + norm + ReLU."""

    def __init__(
        self, in_channels: int, out_channels: int, bn_norm: NormSpec, stride: int = 1, groups: int = 1
    ) -> None:
        super().__init__()
        self.conv = nn.Conv2d(
            in_channels, out_channels, 3, stride=stride, padding=1, bias=False, groups=groups
        )
        self.bn = get_norm(bn_norm, out_channels)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.bn(self.conv(x)))


class LightConv3x3(nn.Module):
    """1x1 conv then depth-wise 3x3 conv, norm, ReLU."""

    def __init__(self, in_channels: int, out_channels: int, bn_norm: NormSpec) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 1, bias=False)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False, groups=out_channels)
        self.bn = get_norm(bn_norm, out_channels)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.bn(self.conv2(self.conv1(x))))


_GATE_ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {
    "sigmoid": nn.Sigmoid,
    "relu": lambda: nn.ReLU(inplace=True),
    "linear": nn.Identity,
}


class ChannelGate(nn.Module):
    """Channel gates from the pooled input (shared by the four streams of an OSBlock): the input
    times the gates, or the ``num_gates`` gates themselves with ``return_gates``."""

    def __init__(
        self,
        in_channels: int,
        num_gates: int | None = None,
        return_gates: bool = False,
        gate_activation: str = "sigmoid",
        reduction: int = 16,
        layer_norm: bool = False,
    ) -> None:
        super().__init__()
        if gate_activation not in _GATE_ACTIVATIONS:
            raise ValueError(
                f"Unknown gate activation: {gate_activation}; expected one of {', '.join(_GATE_ACTIVATIONS)}"
            )
        hidden = in_channels // reduction
        self.return_gates = return_gates
        self.global_avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(in_channels, hidden, kernel_size=1, bias=True)
        self.norm1 = nn.LayerNorm((hidden, 1, 1)) if layer_norm else None
        self.relu = nn.ReLU(inplace=True)
        self.fc2 = nn.Conv2d(hidden, num_gates or in_channels, kernel_size=1, bias=True)
        self.gate_activation = _GATE_ACTIVATIONS[gate_activation]()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gates = self.fc1(self.global_avgpool(x))
        if self.norm1 is not None:
            gates = self.norm1(gates)
        gates = self.gate_activation(self.fc2(self.relu(gates)))
        return gates if self.return_gates else x * gates


class OSBlock(nn.Module):
    """Omni-scale residual block: four streams of 1-4 light 3x3 convs fused by a channel gate;
    an affine InstanceNorm after the sum with ``IN``."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        bn_norm: NormSpec,
        IN: bool = False,
        bottleneck_reduction: int = 4,
        **kwargs: object,
    ) -> None:
        super().__init__()
        mid = out_channels // bottleneck_reduction
        self.conv1 = Conv1x1(in_channels, mid, bn_norm)
        self.conv2a = LightConv3x3(mid, mid, bn_norm)
        self.conv2b = nn.Sequential(*(LightConv3x3(mid, mid, bn_norm) for _ in range(2)))
        self.conv2c = nn.Sequential(*(LightConv3x3(mid, mid, bn_norm) for _ in range(3)))
        self.conv2d = nn.Sequential(*(LightConv3x3(mid, mid, bn_norm) for _ in range(4)))
        self.gate = ChannelGate(mid)
        self.conv3 = Conv1x1Linear(mid, out_channels, bn_norm)
        self.downsample = (
            Conv1x1Linear(in_channels, out_channels, bn_norm) if in_channels != out_channels else None
        )
        self.IN = nn.InstanceNorm2d(out_channels, affine=True) if IN else None
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x1 = self.conv1(x)
        fused = sum(self.gate(stream(x1)) for stream in (self.conv2a, self.conv2b, self.conv2c, self.conv2d))
        out = self.conv3(fused) + (x if self.downsample is None else self.downsample(x))
        if self.IN is not None:
            out = self.IN(out)
        return self.relu(out)


class OSNet(nn.Module):
    """Omni-Scale Network: a 7x7 stem, three stages of ``blocks[i]`` (``layers[i]`` of them) with
    ``channels[i + 1]`` channels, then a 1x1 conv; ``IN`` puts InstanceNorm in the stem and the
    first stage (OSNet-IBN)."""

    def __init__(
        self,
        blocks: list[type[OSBlock]],
        layers: list[int],
        channels: list[int],
        bn_norm: NormSpec,
        IN: bool = False,
        **kwargs: object,
    ) -> None:
        super().__init__()
        if not len(blocks) == len(layers) == len(channels) - 1:
            raise ValueError(
                "OSNet needs one block type and one block count per stage and one more channel count"
            )
        self.conv1 = ConvLayer(3, channels[0], 7, bn_norm, stride=2, padding=3, IN=IN)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.conv2 = self._make_layer(blocks[0], layers[0], channels[0], channels[1], bn_norm, True, IN)
        self.conv3 = self._make_layer(blocks[1], layers[1], channels[1], channels[2], bn_norm, True)
        self.conv4 = self._make_layer(blocks[2], layers[2], channels[2], channels[3], bn_norm, False)
        self.conv5 = Conv1x1(channels[3], channels[3], bn_norm)
        self.out_channels = channels[3]
        self._init_params()

    @staticmethod
    def _make_layer(
        block: type[OSBlock],
        layer: int,
        in_channels: int,
        out_channels: int,
        bn_norm: NormSpec,
        reduce_spatial_size: bool,
        IN: bool = False,
    ) -> nn.Sequential:
        layers: list[nn.Module] = [block(in_channels, out_channels, bn_norm, IN=IN)]
        layers += [block(out_channels, out_channels, bn_norm, IN=IN) for _ in range(1, layer)]
        if reduce_spatial_size:
            layers.append(
                nn.Sequential(Conv1x1(out_channels, out_channels, bn_norm), nn.AvgPool2d(2, stride=2))
            )
        return nn.Sequential(*layers)

    def _init_params(self) -> None:
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                if m.bias is not None:
                    nn.init.constant_(m.bias, 0)
            elif isinstance(m, nn.modules.batchnorm._BatchNorm) and m.affine:
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                if m.bias is not None:
                    nn.init.constant_(m.bias, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.conv1(x))
        return self.conv5(self.conv4(self.conv3(self.conv2(x))))


def init_pretrained_weights(model: nn.Module, key: str = "") -> dict[str, torch.Tensor]:
    """``model``'s state dict with every tensor of the published ImageNet weights for upstream's
    ``key`` ("osnet_x1_0", ..., "osnet_ibn_x1_0") that matches a key and shape (downloaded once
    into TORCH_HOME); load it with ``model.load_state_dict``."""
    variant = key.removeprefix("osnet_")
    published = published_state_dict("osnet", variant, f"OSNet {variant}")
    state = model.state_dict()
    matched = {k: v for k, v in published.items() if k in state and state[k].size() == v.size()}
    state.update(matched)
    return state


@BACKBONE_REGISTRY.register()
def build_osnet_backbone(cfg) -> OSNet:
    """OSNet from ``MODEL.BACKBONE.*`` (DEPTH = width, NORM, WITH_IBN, PRETRAIN[_PATH])."""
    bb = cfg.MODEL.BACKBONE
    width = normalize_depth(bb.DEPTH, list(OSNET_WIDTHS))
    model = OSNet(
        [OSBlock, OSBlock, OSBlock], [2, 2, 2], OSNET_WIDTHS[width], backbone_norm(cfg), IN=bb.WITH_IBN
    )
    if bb.PRETRAIN:
        variant = f"OSNet{'-IBN' if bb.WITH_IBN else ''} {width}"
        source = pretrained_weights_for("osnet", ("ibn_" if bb.WITH_IBN else "") + width)
        load_pretrained_backbone(
            model, bb.PRETRAIN_PATH, None, variant, drop_prefixes=("fc.", "classifier."), source=source
        )
    return model
