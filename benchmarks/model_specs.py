"""Backbones that torchvision also ships, paired for side-by-side timing.

``BACKBONE_SPECS`` lists, for each pair, the ``MODEL.BACKBONE`` overrides that build ours and a
function returning torchvision's same network cut before its pooling/classifier. Both sides are
set up to compute the same thing (same widths, strides, activations): ours with ``LAST_STRIDE 2``
where upstream's default of 1 would change the output size. ``benchmarks/backbones.py`` times
them; ``benchmarks/models.py`` may import the list for its table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from torch import nn


def _trunk(children_to_drop: int, builder: Callable[[], nn.Module]) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        return nn.Sequential(*list(builder().children())[:-children_to_drop])

    return build


def _features(builder: Callable[[], nn.Module]) -> Callable[[], nn.Module]:
    return lambda: builder().features


def _tv(name: str) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        import torchvision.models as tvm

        return getattr(tvm, name)(weights=None)

    return build


@dataclass(frozen=True)
class BackboneSpec:
    name: str
    overrides: dict = field(default_factory=dict)  # MODEL.BACKBONE.* for ours
    torchvision: Callable[[], nn.Module] | None = None
    torchvision_name: str = ""


BACKBONE_SPECS: list[BackboneSpec] = [
    BackboneSpec(
        "ResNeXt-50 32x4d",
        {"NAME": "build_resnext_backbone", "DEPTH": "50x", "LAST_STRIDE": 2, "FEAT_DIM": 2048},
        _trunk(2, _tv("resnext50_32x4d")),
        "resnext50_32x4d",
    ),
    BackboneSpec(
        "RegNetX-800MF",
        {"NAME": "build_regnet_backbone", "DEPTH": "800x", "LAST_STRIDE": 2, "FEAT_DIM": 672},
        _trunk(2, _tv("regnet_x_800mf")),
        "regnet_x_800mf",
    ),
    BackboneSpec(
        "RegNetY-400MF",  # torchvision's 800MF RegNetY has other widths (784 vs pycls's 768)
        {"NAME": "build_regnet_backbone", "DEPTH": "400y", "LAST_STRIDE": 2, "FEAT_DIM": 440},
        _trunk(2, _tv("regnet_y_400mf")),
        "regnet_y_400mf",
    ),
    BackboneSpec(
        "EfficientNet-B0",
        {"NAME": "build_effnet_backbone", "DEPTH": "b0", "LAST_STRIDE": 2, "FEAT_DIM": 1280},
        _features(_tv("efficientnet_b0")),
        "efficientnet_b0",
    ),
    BackboneSpec(
        "MobileNetV2 1.0x",
        {"NAME": "build_mobilenetv2_backbone", "DEPTH": "1.0x", "FEAT_DIM": 1280},
        _features(_tv("mobilenet_v2")),
        "mobilenet_v2",
    ),
    BackboneSpec(
        "ShuffleNetV2 1.0x",
        {"NAME": "build_shufflenetv2_backbone", "DEPTH": "1.0x", "FEAT_DIM": 1024},
        _trunk(1, _tv("shufflenet_v2_x1_0")),
        "shufflenet_v2_x1_0",
    ),
    BackboneSpec("ResNeSt-50", {"NAME": "build_resnest_backbone", "DEPTH": "50x", "FEAT_DIM": 2048}),
]


def build_ours(spec: BackboneSpec) -> nn.Module:
    """Our backbone for ``spec`` (random weights, CPU)."""
    from fastreid.config import get_cfg
    from fastreid.modeling import build_backbone

    cfg = get_cfg()
    cfg.MODEL.DEVICE = "cpu"
    cfg.MODEL.BACKBONE.PRETRAIN = False
    for key, value in spec.overrides.items():
        setattr(cfg.MODEL.BACKBONE, key, value)
    return build_backbone(cfg)
