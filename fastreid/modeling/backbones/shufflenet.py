"""ShuffleNetV2 (Ma et al., 2018), Megvii's reference layout, as upstream FastReID registers it.

Keys: ``first_conv.{0,1}``, ``features.i.branch_main.{0,1,3,4,5,6}`` (1x1, depthwise 3x3, 1x1),
``features.i.branch_proj.{0,1,2,3}`` in the stride-2 blocks, ``conv_last.{0,1}``. Stride-1 blocks
split the channels by a shuffle (even channels pass through, odd ones go through ``branch_main``).
``DEPTH``: 0.5x, 1.0x, 1.5x, 2.0x. The stride is fixed at 32 (``LAST_STRIDE`` is not used, as
upstream). Output: 1024 channels (2048 for 2.0x).
"""

from __future__ import annotations

import torch
from torch import nn

from fastreid.layers import get_norm
from fastreid.layers.batch_norm import NormSpec

from .build import BACKBONE_REGISTRY, backbone_norm
from .pretrained import load_pretrained_backbone
from .resnet import normalize_depth

__all__ = ["ShuffleNetV2", "ShuffleV2Block", "build_shufflenetv2_backbone", "SHUFFLENETV2_CHANNELS"]

# stage output channels: stem, stage 2, 3, 4, last conv
SHUFFLENETV2_CHANNELS = {
    "0.5x": (24, 48, 96, 192, 1024),
    "1.0x": (24, 116, 232, 464, 1024),
    "1.5x": (24, 176, 352, 704, 1024),
    "2.0x": (24, 244, 488, 976, 2048),
}
_REPEATS = (4, 8, 4)


class ShuffleV2Block(nn.Module):
    """One ShuffleNetV2 unit: ``ksize`` x ``ksize`` depthwise convs; stride 2 halves the map and
    concatenates a projection branch, stride 1 passes half the channels through."""

    def __init__(
        self, bn_norm: NormSpec, inp: int, oup: int, mid_channels: int, *, ksize: int = 3, stride: int = 1
    ) -> None:
        super().__init__()
        if stride not in (1, 2):
            raise ValueError(f"ShuffleV2Block stride must be 1 or 2, got {stride}")
        self.stride = stride
        self.ksize = ksize
        pad = ksize // 2
        self.branch_main = nn.Sequential(
            nn.Conv2d(inp, mid_channels, 1, bias=False),
            get_norm(bn_norm, mid_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid_channels, mid_channels, ksize, stride, pad, groups=mid_channels, bias=False),
            get_norm(bn_norm, mid_channels),
            nn.Conv2d(mid_channels, oup - inp, 1, bias=False),
            get_norm(bn_norm, oup - inp),
            nn.ReLU(inplace=True),
        )
        self.branch_proj = None
        if stride == 2:
            self.branch_proj = nn.Sequential(
                nn.Conv2d(inp, inp, ksize, stride, pad, groups=inp, bias=False),
                get_norm(bn_norm, inp),
                nn.Conv2d(inp, inp, 1, bias=False),
                get_norm(bn_norm, inp),
                nn.ReLU(inplace=True),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.branch_proj is not None:
            return torch.cat((self.branch_proj(x), self.branch_main(x)), 1)
        passed, processed = x[:, 0::2], x[:, 1::2]
        return torch.cat((passed, self.branch_main(processed)), 1)


class ShuffleNetV2(nn.Module):
    def __init__(self, bn_norm: NormSpec = "BN", model_size: str = "1.5x") -> None:
        super().__init__()
        stem, *stages, last = SHUFFLENETV2_CHANNELS[model_size]
        self.first_conv = nn.Sequential(
            nn.Conv2d(3, stem, 3, 2, 1, bias=False), get_norm(bn_norm, stem), nn.ReLU(inplace=True)
        )
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        blocks: list[nn.Module] = []
        channels = stem
        for repeats, out in zip(_REPEATS, stages):
            blocks.append(ShuffleV2Block(bn_norm, channels, out, out // 2, stride=2))
            blocks += [ShuffleV2Block(bn_norm, out // 2, out, out // 2, stride=1) for _ in range(1, repeats)]
            channels = out
        self.features = nn.Sequential(*blocks)
        self.conv_last = nn.Sequential(
            nn.Conv2d(channels, last, 1, bias=False), get_norm(bn_norm, last), nn.ReLU(inplace=True)
        )
        self.out_channels = last
        self._init_weights()

    def _init_weights(self) -> None:
        """Megvii's initialisation, as upstream: stem N(0, 0.01), other convs N(0, 1 / in_channels),
        BatchNorm weight 1, bias 1e-4."""
        for name, m in self.named_modules():
            if isinstance(m, nn.Conv2d):
                std = 0.01 if name.startswith("first") else 1.0 / m.weight.shape[1]
                nn.init.normal_(m.weight, 0, std)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0.0001)
                assert m.running_mean is not None  # BatchNorm2d tracks running statistics by default
                nn.init.constant_(m.running_mean, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv_last(self.features(self.maxpool(self.first_conv(x))))


@BACKBONE_REGISTRY.register()
def build_shufflenetv2_backbone(cfg) -> ShuffleNetV2:
    """ShuffleNetV2 from ``MODEL.BACKBONE.*`` (DEPTH = size, NORM, PRETRAIN_PATH). Upstream publishes
    no weights for it: ``PRETRAIN`` needs ``PRETRAIN_PATH`` (e.g. Megvii's ShuffleNetV2 checkpoint)."""
    bb = cfg.MODEL.BACKBONE
    size = normalize_depth(bb.DEPTH, list(SHUFFLENETV2_CHANNELS))
    model = ShuffleNetV2(backbone_norm(cfg), size)
    if bb.PRETRAIN:
        load_pretrained_backbone(
            model, bb.PRETRAIN_PATH, None, f"ShuffleNetV2 {size}", drop_prefixes=("classifier.",)
        )
    return model
