"""EfficientNet-B0..B5 as upstream FastReID builds them (pycls's ``EffNet``, no drop-connect).

Keys: ``stem.{conv,bn}``, ``sS.bB.{exp,exp_bn,dwise,dwise_bn,se.f_ex.0,se.f_ex.2,lin_proj,lin_proj_bn}``
(``exp`` only where the expansion ratio is not 1), ``head.{conv,conv_bn}``. The numbers of each
variant are those of pycls's ``EN-B*_dds_8gpu.yaml`` files that upstream ships. Stage 6's stride
is ``LAST_STRIDE``. Swish is ``nn.SiLU`` (the same function). Output: ``HEAD_W`` channels (1280 for B0).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from fastreid.layers import get_norm
from fastreid.layers.batch_norm import NormSpec

from ..build import BACKBONE_REGISTRY, backbone_norm
from ..pretrained import load_pretrained_backbone
from ..pretrained_urls import pretrained_weights_for
from ..resnet import normalize_depth
from .regnet import SqueezeExcite, init_weights

__all__ = ["EffNet", "EffNetSpec", "EFFNET_SPECS", "MBConv", "build_effnet_backbone"]


@dataclass(frozen=True)
class EffNetSpec:
    stem_w: int
    depths: tuple[int, ...]
    widths: tuple[int, ...]
    head_w: int
    strides: tuple[int, ...] = (1, 2, 2, 2, 1, 2, 1)
    exp_ratios: tuple[int, ...] = (1, 6, 6, 6, 6, 6, 6)
    kernels: tuple[int, ...] = (3, 3, 5, 3, 5, 5, 3)
    se_ratio: float = 0.25


EFFNET_SPECS: dict[str, EffNetSpec] = {
    "b0": EffNetSpec(32, (1, 2, 2, 3, 3, 4, 1), (16, 24, 40, 80, 112, 192, 320), 1280),
    "b1": EffNetSpec(32, (2, 3, 3, 4, 4, 5, 2), (16, 24, 40, 80, 112, 192, 320), 1280),
    "b2": EffNetSpec(32, (2, 3, 3, 4, 4, 5, 2), (16, 24, 48, 88, 120, 208, 352), 1408),
    "b3": EffNetSpec(40, (2, 3, 3, 5, 5, 6, 2), (24, 32, 48, 96, 136, 232, 384), 1536),
    "b4": EffNetSpec(48, (2, 4, 4, 6, 6, 8, 2), (24, 32, 56, 112, 160, 272, 448), 1792),
    "b5": EffNetSpec(48, (3, 5, 5, 7, 7, 9, 3), (24, 40, 64, 128, 176, 304, 512), 2048),
}
_LAST_STRIDE_STAGE = 5  # upstream applies LAST_STRIDE to the sixth stage


class MBConv(nn.Module):
    """Inverted bottleneck: (1x1 expand), depthwise kxk, SE, 1x1 project; residual when shapes allow."""

    def __init__(
        self,
        w_in: int,
        exp_ratio: int,
        kernel: int,
        stride: int,
        se_ratio: float,
        w_out: int,
        bn_norm: NormSpec,
    ) -> None:
        super().__init__()
        w_exp = int(w_in * exp_ratio)
        self.exp = None
        if w_exp != w_in:
            self.exp = nn.Conv2d(w_in, w_exp, 1, bias=False)
            self.exp_bn = get_norm(bn_norm, w_exp)
            self.exp_swish = nn.SiLU(inplace=True)
        self.dwise = nn.Conv2d(w_exp, w_exp, kernel, stride, (kernel - 1) // 2, groups=w_exp, bias=False)
        self.dwise_bn = get_norm(bn_norm, w_exp)
        self.dwise_swish = nn.SiLU(inplace=True)
        self.se = SqueezeExcite(w_exp, int(w_in * se_ratio), activation=nn.SiLU)
        self.lin_proj = nn.Conv2d(w_exp, w_out, 1, bias=False)
        self.lin_proj_bn = get_norm(bn_norm, w_out)
        self.has_skip = stride == 1 and w_in == w_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = x
        if self.exp is not None:
            f = self.exp_swish(self.exp_bn(self.exp(f)))
        f = self.se(self.dwise_swish(self.dwise_bn(self.dwise(f))))
        f = self.lin_proj_bn(self.lin_proj(f))
        return x + f if self.has_skip else f


class _ConvNormSwish(nn.Module):
    def __init__(
        self, w_in: int, w_out: int, kernel: int, stride: int, bn_norm: NormSpec, names: tuple[str, str, str]
    ):
        super().__init__()
        self._names = names
        self.add_module(names[0], nn.Conv2d(w_in, w_out, kernel, stride, (kernel - 1) // 2, bias=False))
        self.add_module(names[1], get_norm(bn_norm, w_out))
        self.add_module(names[2], nn.SiLU(inplace=True))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for name in self._names:
            x = getattr(self, name)(x)
        return x


class EffNet(nn.Sequential):
    """Stem, stages ``s1``..``s7``, then the 1x1 head, applied in order."""

    def __init__(self, spec: EffNetSpec, last_stride: int, bn_norm: NormSpec) -> None:
        super().__init__()
        self.stem = _ConvNormSwish(3, spec.stem_w, 3, 2, bn_norm, ("conv", "bn", "swish"))
        w_in = spec.stem_w
        stage_params = zip(spec.depths, spec.widths, spec.exp_ratios, spec.strides, spec.kernels)
        for i, (depth, w_out, exp_ratio, stride, kernel) in enumerate(stage_params):
            stride = last_stride if i == _LAST_STRIDE_STAGE else stride
            stage = nn.Sequential()
            for b in range(depth):
                stage.add_module(
                    f"b{b + 1}",
                    MBConv(
                        w_in if b == 0 else w_out,
                        exp_ratio,
                        kernel,
                        stride if b == 0 else 1,
                        spec.se_ratio,
                        w_out,
                        bn_norm,
                    ),
                )
            self.add_module(f"s{i + 1}", stage)
            w_in = w_out
        self.head = _ConvNormSwish(w_in, spec.head_w, 1, 1, bn_norm, ("conv", "conv_bn", "conv_swish"))
        self.out_channels = spec.head_w
        self.apply(init_weights)


@BACKBONE_REGISTRY.register()
def build_effnet_backbone(cfg) -> EffNet:
    """EfficientNet from ``MODEL.BACKBONE.*`` (DEPTH b0..b5, LAST_STRIDE, NORM, PRETRAIN[_PATH])."""
    bb = cfg.MODEL.BACKBONE
    depth = normalize_depth(str(bb.DEPTH).lower(), list(EFFNET_SPECS))
    model = EffNet(EFFNET_SPECS[depth], bb.LAST_STRIDE, backbone_norm(cfg))
    if bb.PRETRAIN:
        load_pretrained_backbone(
            model,
            bb.PRETRAIN_PATH,
            None,
            f"EfficientNet-{depth.upper()}",
            drop_prefixes=("head.fc.",),
            source=pretrained_weights_for("effnet", depth),
        )
    return model
