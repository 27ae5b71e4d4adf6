"""ResNeXt-50/101/152 (32x4d) with optional IBN-a and non-local blocks, as upstream FastReID builds it.

Blocks are torchvision's ``Bottleneck`` with 32 groups of width 4 (keys ``convK``/``bnK``/
``downsample.{0,1}``, the same maths), so plain ResNeXt-50 is torchvision's ``resnext50_32x4d``
trunk. Upstream's arrangement differs from ``build_resnet_backbone`` in two ways kept here:
IBN-a (``bn1.IN``/``bn1.BN``) is applied in all four stages, and the stem pooling is torchvision's
padded ``MaxPool2d(3, 2, padding=1)``. Non-local blocks (``WITH_NL``) follow the last 2 blocks of
layer2 and the last 3 of layer3 for both 50x and 101x (upstream's table); 152x has none.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

import torch
import torchvision.models as tvm
from torch import nn
from torchvision.models import resnet as tv_resnet

from fastreid.config import ConfigError
from fastreid.layers import get_norm
from fastreid.layers.batch_norm import NormSpec
from fastreid.layers.non_local import Non_local

from .build import BACKBONE_REGISTRY
from .pretrained import load_pretrained_backbone, published_state_dict
from .pretrained_urls import pretrained_weights_for
from .resnet import TorchvisionBlockMixin, normalize_depth, upstream_random_init

__all__ = ["ResNeXt", "Bottleneck", "build_resnext_backbone", "init_pretrained_weights", "RESNEXT_DEPTHS"]

logger = logging.getLogger(__name__)

# depth -> (blocks per stage, non-local blocks per stage or None when upstream has none)
RESNEXT_DEPTHS: dict[str, tuple[list[int], list[int] | None]] = {
    "50x": ([3, 4, 6, 3], [0, 2, 3, 0]),
    "101x": ([3, 4, 23, 3], [0, 2, 3, 0]),
    "152x": ([3, 8, 36, 3], None),
}


class Bottleneck(TorchvisionBlockMixin, tv_resnet.Bottleneck):
    """ResNeXt's bottleneck (type C): torchvision's, ``cardinality`` groups of
    ``floor(planes * baseWidth / 64)`` channels; ``bn1`` becomes IBN-a when ``with_ibn``."""

    def __init__(
        self,
        inplanes: int,
        planes: int,
        bn_norm: NormSpec,
        with_ibn: bool,
        baseWidth: int,
        cardinality: int,
        stride: int = 1,
        downsample: nn.Module | None = None,
        norm_kwargs: dict | None = None,
    ) -> None:
        super().__init__(
            inplanes,
            planes,
            bn_norm,
            with_ibn,
            False,
            stride,
            downsample,
            norm_kwargs=norm_kwargs,
            groups=cardinality,
            base_width=baseWidth,
        )


class ResNeXt(nn.Module):
    """ResNeXt with ``block`` (:class:`Bottleneck`) stages of ``layers`` blocks; with ``with_nl``,
    ``non_layers[i]`` non-local blocks follow the last blocks of stage ``i``."""

    def __init__(
        self,
        last_stride: int,
        bn_norm: NormSpec,
        with_ibn: bool,
        with_nl: bool,
        block: type[Bottleneck],
        layers: list[int],
        non_layers: list[int] | None,
        baseWidth: int = 4,
        cardinality: int = 32,
        norm_kwargs: dict | None = None,
        nl_inter_channels: str = "upstream",
    ) -> None:
        super().__init__()
        if with_nl and non_layers is None:
            raise ValueError("ResNeXt with_nl needs non_layers: the non-local blocks per stage")
        self._norm_kwargs = norm_kwargs or {}
        self.cardinality = cardinality
        self.baseWidth = baseWidth
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = get_norm(bn_norm, 64, **self._norm_kwargs)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool1 = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, 64, layers[0], 1, bn_norm, with_ibn)
        self.layer2 = self._make_layer(block, 128, layers[1], 2, bn_norm, with_ibn)
        self.layer3 = self._make_layer(block, 256, layers[2], 2, bn_norm, with_ibn)
        self.layer4 = self._make_layer(block, 512, layers[3], last_stride, bn_norm, with_ibn)
        self.out_channels = 512 * block.expansion
        upstream_random_init(self)  # upstream's ResNeXt initialises exactly as its ResNet

        # stage -> {block index: non-local index}; a non-local block follows each of the last n blocks
        self._nl_after: list[dict[int, int]] = [{}, {}, {}, {}]
        if with_nl and non_layers is not None:
            for stage, (count, n_blocks) in enumerate(zip(non_layers, layers)):
                channels = (64 << stage) * block.expansion
                setattr(
                    self,
                    f"NL_{stage + 1}",
                    nn.ModuleList(
                        Non_local(channels, bn_norm, inter_channels=nl_inter_channels, **self._norm_kwargs)
                        for _ in range(count)
                    ),
                )
                self._nl_after[stage] = {n_blocks - count + i: i for i in range(count)}

    def _make_layer(
        self,
        block: type[Bottleneck],
        planes: int,
        blocks: int,
        stride: int,
        bn_norm: NormSpec,
        with_ibn: bool,
    ) -> nn.Sequential:
        out = planes * block.expansion
        downsample = None
        if stride != 1 or self.inplanes != out:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, out, 1, stride=stride, bias=False),
                get_norm(bn_norm, out, **self._norm_kwargs),
            )
        args = (bn_norm, with_ibn, self.baseWidth, self.cardinality)
        first = block(self.inplanes, planes, *args, stride, downsample, norm_kwargs=self._norm_kwargs)
        self.inplanes = out
        rest = [block(out, planes, *args, norm_kwargs=self._norm_kwargs) for _ in range(1, blocks)]
        return nn.Sequential(first, *rest)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool1(self.relu(self.bn1(self.conv1(x))))
        for stage, layer in enumerate((self.layer1, self.layer2, self.layer3, self.layer4)):
            nl_after = self._nl_after[stage]
            if not nl_after:
                x = layer(x)
                continue
            non_local = getattr(self, f"NL_{stage + 1}")
            for i, block in enumerate(layer):
                x = block(x)
                if i in nl_after:
                    x = non_local[nl_after[i]](x)
        return x


def init_pretrained_weights(key: str) -> OrderedDict[str, torch.Tensor]:
    """The published ImageNet weights for upstream's ``key`` ("ibn_101x"; also "50x", torchvision's
    ResNeXt-50 32x4d) as a state dict, downloaded once into TORCH_HOME."""
    tv_weights = tvm.ResNeXt50_32X4D_Weights.IMAGENET1K_V1 if key == "50x" else None
    return published_state_dict("resnext", key, f"ResNeXt {key}", tv_weights)


@BACKBONE_REGISTRY.register()
def build_resnext_backbone(cfg) -> ResNeXt:
    """ResNeXt from ``MODEL.BACKBONE.*`` (DEPTH 50x/101x/152x, LAST_STRIDE, NORM, WITH_IBN, WITH_NL,
    PRETRAIN[_PATH])."""
    bb = cfg.MODEL.BACKBONE
    depth = normalize_depth(bb.DEPTH, list(RESNEXT_DEPTHS))
    layers, non_layers = RESNEXT_DEPTHS[depth]
    if bb.WITH_NL and non_layers is None:
        raise ConfigError(
            f"build_resnext_backbone has no non-local variant for DEPTH {depth} (upstream "
            "defines 50x and 101x); set MODEL.BACKBONE.WITH_NL False or DEPTH 50x/101x"
        )
    if bb.WITH_SE:
        logger.warning(
            "build_resnext_backbone has no SE variant; ignoring MODEL.BACKBONE.WITH_SE "
            "(upstream FastReID ignores it too)"
        )
    model = ResNeXt(
        bb.LAST_STRIDE,
        bb.NORM,
        bb.WITH_IBN,
        bb.WITH_NL,
        Bottleneck,
        layers,
        non_layers,
        norm_kwargs={"num_splits": bb.NORM_SPLIT},
        nl_inter_channels=bb.NL_INTER_CHANNELS,
    )
    if bb.PRETRAIN:
        tv_weights = None
        if depth == "50x" and not bb.WITH_IBN:
            tv_weights = tvm.ResNeXt50_32X4D_Weights.IMAGENET1K_V1
        key = ("ibn_" if bb.WITH_IBN else "") + depth
        description = ("IBN-a " if bb.WITH_IBN else "") + f"ResNeXt-{depth[:-1]} 32x4d"
        load_pretrained_backbone(
            model, bb.PRETRAIN_PATH, tv_weights, description, source=pretrained_weights_for("resnext", key)
        )
    return model
