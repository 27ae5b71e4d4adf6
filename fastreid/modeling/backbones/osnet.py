"""OSNet (Zhou et al., ICCV 2019): a light omni-scale backbone, fast enough for CPU training.

Widths x1_0, x0_75, x0_5, x0_25 (``MODEL.BACKBONE.DEPTH``); ``WITH_IBN`` gives OSNet-IBN
(instance norm in the stem and the first stage). Module names follow upstream FastReID (and
deep-person-reid), so their checkpoints load. The output has ``channels[3]`` channels (512 for
x1_0): set ``MODEL.BACKBONE.FEAT_DIM`` to it.
"""

from __future__ import annotations

import torch
from torch import nn

from fastreid.layers import get_norm
from fastreid.layers.batch_norm import NormSpec

from .build import BACKBONE_REGISTRY, backbone_norm
from .pretrained import load_pretrained_backbone
from .pretrained_urls import pretrained_weights_for
from .resnet import normalize_depth

__all__ = ["OSNet", "OSBlock", "build_osnet_backbone", "OSNET_WIDTHS"]

OSNET_WIDTHS = {
    "x1_0": [64, 256, 384, 512],
    "x0_75": [48, 192, 288, 384],
    "x0_5": [32, 128, 192, 256],
    "x0_25": [16, 64, 96, 128],
}


class ConvLayer(nn.Module):
    """conv (k x k) + norm (or affine InstanceNorm) + ReLU."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        bn_norm: NormSpec,
        stride: int = 1,
        padding: int = 0,
        instance_norm: bool = False,
    ) -> None:
        super().__init__()
        self.conv = nn.Conv2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, bias=False
        )
        self.bn = (
            nn.InstanceNorm2d(out_channels, affine=True) if instance_norm else get_norm(bn_norm, out_channels)
        )
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.bn(self.conv(x)))


class Conv1x1(nn.Module):
    """1x1 conv + norm, followed by ReLU unless ``linear``."""

    def __init__(self, in_channels: int, out_channels: int, bn_norm: NormSpec, linear: bool = False) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 1, bias=False)
        self.bn = get_norm(bn_norm, out_channels)
        self.relu = nn.Identity() if linear else nn.ReLU(inplace=True)

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


class ChannelGate(nn.Module):
    """Sigmoid channel gate (shared by the four streams of an OSBlock)."""

    def __init__(self, in_channels: int, reduction: int = 16) -> None:
        super().__init__()
        self.global_avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(in_channels, in_channels // reduction, kernel_size=1, bias=True)
        self.relu = nn.ReLU(inplace=True)
        self.fc2 = nn.Conv2d(in_channels // reduction, in_channels, kernel_size=1, bias=True)
        self.gate_activation = nn.Sigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = self.gate_activation(self.fc2(self.relu(self.fc1(self.global_avgpool(x)))))
        return x * gate


class OSBlock(nn.Module):
    """Omni-scale residual block: four streams of 1-4 light 3x3 convs fused by a channel gate."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        bn_norm: NormSpec,
        instance_norm: bool = False,
        bottleneck_reduction: int = 4,
    ) -> None:
        super().__init__()
        mid = out_channels // bottleneck_reduction
        self.conv1 = Conv1x1(in_channels, mid, bn_norm)
        self.conv2a = LightConv3x3(mid, mid, bn_norm)
        self.conv2b = nn.Sequential(*(LightConv3x3(mid, mid, bn_norm) for _ in range(2)))
        self.conv2c = nn.Sequential(*(LightConv3x3(mid, mid, bn_norm) for _ in range(3)))
        self.conv2d = nn.Sequential(*(LightConv3x3(mid, mid, bn_norm) for _ in range(4)))
        self.gate = ChannelGate(mid)
        self.conv3 = Conv1x1(mid, out_channels, bn_norm, linear=True)
        self.downsample = (
            Conv1x1(in_channels, out_channels, bn_norm, linear=True) if in_channels != out_channels else None
        )
        self.IN = nn.InstanceNorm2d(out_channels, affine=True) if instance_norm else None
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x1 = self.conv1(x)
        fused = sum(self.gate(stream(x1)) for stream in (self.conv2a, self.conv2b, self.conv2c, self.conv2d))
        out = self.conv3(fused) + (x if self.downsample is None else self.downsample(x))
        if self.IN is not None:
            out = self.IN(out)
        return self.relu(out)


class OSNet(nn.Module):
    def __init__(
        self,
        channels: list[int],
        bn_norm: NormSpec = "BN",
        instance_norm: bool = False,
        blocks_per_stage: tuple[int, int, int] = (2, 2, 2),
    ) -> None:
        super().__init__()
        self.conv1 = ConvLayer(3, channels[0], 7, bn_norm, stride=2, padding=3, instance_norm=instance_norm)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.conv2 = self._make_stage(
            blocks_per_stage[0], channels[0], channels[1], bn_norm, True, instance_norm
        )
        self.conv3 = self._make_stage(blocks_per_stage[1], channels[1], channels[2], bn_norm, True, False)
        self.conv4 = self._make_stage(blocks_per_stage[2], channels[2], channels[3], bn_norm, False, False)
        self.conv5 = Conv1x1(channels[3], channels[3], bn_norm)
        self.out_channels = channels[3]
        self._init_params()

    @staticmethod
    def _make_stage(
        n_blocks: int,
        in_channels: int,
        out_channels: int,
        bn_norm: NormSpec,
        reduce_spatial_size: bool,
        instance_norm: bool,
    ) -> nn.Sequential:
        layers: list[nn.Module] = [OSBlock(in_channels, out_channels, bn_norm, instance_norm)]
        layers += [OSBlock(out_channels, out_channels, bn_norm, instance_norm) for _ in range(1, n_blocks)]
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

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.conv1(x))
        return self.conv5(self.conv4(self.conv3(self.conv2(x))))


@BACKBONE_REGISTRY.register()
def build_osnet_backbone(cfg) -> OSNet:
    """OSNet from ``MODEL.BACKBONE.*`` (DEPTH = width, NORM, WITH_IBN, PRETRAIN[_PATH])."""
    bb = cfg.MODEL.BACKBONE
    width = normalize_depth(bb.DEPTH, list(OSNET_WIDTHS))
    model = OSNet(OSNET_WIDTHS[width], backbone_norm(cfg), instance_norm=bb.WITH_IBN)
    if bb.PRETRAIN:
        variant = f"OSNet{'-IBN' if bb.WITH_IBN else ''} {width}"
        source = pretrained_weights_for("osnet", ("ibn_" if bb.WITH_IBN else "") + width)
        load_pretrained_backbone(
            model, bb.PRETRAIN_PATH, None, variant, drop_prefixes=("fc.", "classifier."), source=source
        )
    return model
