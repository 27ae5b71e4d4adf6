"""A tiny backbone registered the way upstream's projects register theirs (FastFace's IResNet,
FastDistill's ResNet): a builder function in ``BACKBONE_REGISTRY`` taking the config."""

from __future__ import annotations

from torch import nn

from fastreid.modeling.backbones import BACKBONE_REGISTRY


class TinyNet(nn.Module):
    """Two strided convolutions with BatchNorm; ``FEAT_DIM`` output channels."""

    def __init__(self, feat_dim: int) -> None:
        super().__init__()
        self.out_channels = feat_dim
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(16),
            nn.ReLU(inplace=True),
            nn.Conv2d(16, feat_dim, 3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(feat_dim),
            nn.ReLU(inplace=True),
        )

    def forward(self, x):
        return self.body(x)


@BACKBONE_REGISTRY.register()
def build_tiny_project_backbone(cfg):
    return TinyNet(cfg.MODEL.BACKBONE.FEAT_DIM)
