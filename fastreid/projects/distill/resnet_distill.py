"""``build_resnet_backbone_distill``: the ResNet whose stage outputs can be read before their
last ReLU (upstream FastDistill's ``resnet_distill``), what overhaul distillation compares.

Upstream wrote a second ResNet whose blocks apply the ReLU at their start instead of their end;
the network is the same function with the same state-dict keys. Here it is fastreid's own ResNet
(:func:`fastreid.modeling.backbones.resnet.build_resnet_backbone`: the same depths, IBN, SE,
pretrained weights) with what the distiller asks of it:

- ``extract_feature(x, preReLU=False)``: the four stages' outputs (before their last ReLU with
  ``preReLU``) and the final feature map (after it);
- ``get_channel_nums()``: the four stages' channels;
- ``get_bn_before_relu()``: the last norm of each stage's last block (the distribution of the
  pre-ReLU output, from which the margins are computed).

As upstream's, it has no non-local blocks: ``WITH_NL`` True is a one-line error.
"""

from __future__ import annotations

from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from fastreid.config import ConfigError
from fastreid.modeling.backbones import BACKBONE_REGISTRY
from fastreid.modeling.backbones.resnet import BasicBlock, Bottleneck, ResNet, build_resnet_backbone

from ..registration import register_once

__all__ = ["ResNetDistill", "build_resnet_backbone_distill", "pre_relu"]


def pre_relu(block: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The output of a residual ``block`` before its final ReLU."""
    b = cast(Bottleneck, block)
    identity = x if b.downsample is None else b.downsample(x)
    out = b.relu(b.bn1(b.conv1(x)))
    if isinstance(block, Bottleneck):
        out = b.relu(b.bn2(b.conv2(out)))
        out = b.se(b.bn3(b.conv3(out)))
    else:
        out = b.se(b.bn2(b.conv2(out)))
    return out + identity


class ResNetDistill(ResNet):
    """fastreid's :class:`ResNet` with the stage features overhaul distillation reads."""

    def _stages(self) -> list[nn.Sequential]:
        return [self.layer1, self.layer2, self.layer3, self.layer4]

    def get_channel_nums(self) -> list[int]:
        return [int(cast(nn.BatchNorm2d, bn).num_features) for bn in self.get_bn_before_relu()]

    def get_bn_before_relu(self) -> list[nn.Module]:
        last = [stage[-1] for stage in self._stages()]
        return [blk.bn3 if isinstance(blk, Bottleneck) else cast(BasicBlock, blk).bn2 for blk in last]

    def extract_feature(
        self, x: torch.Tensor, preReLU: bool = False
    ) -> tuple[list[torch.Tensor], torch.Tensor]:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        feats = []
        for stage in self._stages():
            for blk in stage[:-1]:
                x = blk(x)
            feat = pre_relu(stage[-1], x)
            x = F.relu(feat)
            feats.append(feat if preReLU else x)
        return feats, x


def build_resnet_backbone_distill(cfg) -> ResNetDistill:
    """:func:`build_resnet_backbone` (``MODEL.BACKBONE.*``) as a :class:`ResNetDistill`."""
    if cfg.MODEL.BACKBONE.WITH_NL:
        raise ConfigError(
            "build_resnet_backbone_distill has no non-local blocks (as upstream's): set MODEL.BACKBONE.WITH_NL False"
        )
    model = build_resnet_backbone(cfg)
    model.__class__ = ResNetDistill  # the same modules and weights; the subclass adds methods only
    return cast(ResNetDistill, model)


register_once(BACKBONE_REGISTRY, build_resnet_backbone_distill)
