"""EfficientNet-B0..B5 as upstream FastReID builds them (pycls's ``EffNet``).

Keys: ``stem.{conv,bn}``, ``sS.bB.{exp,exp_bn,dwise,dwise_bn,se.f_ex.0,se.f_ex.2,lin_proj,lin_proj_bn}``
(``exp`` only where the expansion ratio is not 1), ``head.{conv,conv_bn}``. The numbers of each
variant are those of pycls's ``EN-B*_dds_8gpu.yaml`` files that upstream ships. Stage 6's stride
is ``LAST_STRIDE``. Swish is ``nn.SiLU`` (the same function). Output: ``HEAD_W`` channels (1280 for
B0). ``EffNet(last_stride, bn_norm)`` without design arguments reads the global config's ``EN``
section, as upstream's does; this package's builder passes each variant's numbers.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from fastreid.layers import get_norm
from fastreid.layers.batch_norm import NormSpec

from ..build import BACKBONE_REGISTRY, backbone_norm
from ..pretrained import load_pretrained_backbone, published_state_dict
from ..pretrained_urls import pretrained_weights_for
from ..resnet import normalize_depth
from .config import cfg as effnet_cfg
from .regnet import drop_connect, init_weights

__all__ = [
    "EffNet",
    "EffNetSpec",
    "EFFNET_SPECS",
    "EffHead",
    "EffStage",
    "MBConv",
    "SE",
    "StemIN",
    "Swish",
    "init_pretrained_weights",
    "build_effnet_backbone",
]


@dataclass(frozen=True)
class EffNetSpec:
    """An EfficientNet variant's design numbers, named as ``EffNet``'s keyword arguments."""

    stem_w: int
    ds: tuple[int, ...]
    ws: tuple[int, ...]
    head_w: int
    ss: tuple[int, ...] = (1, 2, 2, 2, 1, 2, 1)
    exp_rs: tuple[int, ...] = (1, 6, 6, 6, 6, 6, 6)
    ks: tuple[int, ...] = (3, 3, 5, 3, 5, 5, 3)
    se_r: float = 0.25


EFFNET_SPECS: dict[str, EffNetSpec] = {
    "b0": EffNetSpec(32, (1, 2, 2, 3, 3, 4, 1), (16, 24, 40, 80, 112, 192, 320), 1280),
    "b1": EffNetSpec(32, (2, 3, 3, 4, 4, 5, 2), (16, 24, 40, 80, 112, 192, 320), 1280),
    "b2": EffNetSpec(32, (2, 3, 3, 4, 4, 5, 2), (16, 24, 48, 88, 120, 208, 352), 1408),
    "b3": EffNetSpec(40, (2, 3, 3, 5, 5, 6, 2), (24, 32, 48, 96, 136, 232, 384), 1536),
    "b4": EffNetSpec(48, (2, 4, 4, 6, 6, 8, 2), (24, 32, 56, 112, 160, 272, 448), 1792),
    "b5": EffNetSpec(48, (3, 5, 5, 7, 7, 9, 3), (24, 40, 64, 128, 176, 304, 512), 2048),
}
_LAST_STRIDE_STAGE = 5  # upstream applies LAST_STRIDE to the sixth stage


class Swish(nn.SiLU):
    """``x * sigmoid(x)``."""


class EffHead(nn.Module):
    """1x1 conv to ``w_out``, norm, Swish (keys ``conv``, ``conv_bn``); pycls's pooling and
    classifier are left out."""

    def __init__(self, w_in: int, w_out: int, bn_norm: NormSpec) -> None:
        super().__init__()
        self.conv = nn.Conv2d(w_in, w_out, 1, stride=1, padding=0, bias=False)
        self.conv_bn = get_norm(bn_norm, w_out)
        self.conv_swish = Swish(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv_swish(self.conv_bn(self.conv(x)))


class SE(nn.Module):
    """Squeeze-and-excitation with Swish: average pool, 1x1 conv to ``w_se``, Swish, 1x1 conv
    back, sigmoid gate (keys ``f_ex.0``, ``f_ex.2``)."""

    def __init__(self, w_in: int, w_se: int) -> None:
        super().__init__()
        self.avg_pool = nn.AdaptiveAvgPool2d((1, 1))
        self.f_ex = nn.Sequential(
            nn.Conv2d(w_in, w_se, 1, bias=True), Swish(), nn.Conv2d(w_se, w_in, 1, bias=True), nn.Sigmoid()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.f_ex(self.avg_pool(x))


class MBConv(nn.Module):
    """Inverted bottleneck: (1x1 expand by ``exp_r``), depthwise ``kernel`` x ``kernel``, SE,
    1x1 project; residual when shapes allow, with drop connect (``dc_ratio``) in training."""

    def __init__(
        self,
        w_in: int,
        exp_r: float,
        kernel: int,
        stride: int,
        se_r: float,
        w_out: int,
        bn_norm: NormSpec,
        dc_ratio: float = 0.0,
    ) -> None:
        super().__init__()
        w_exp = int(w_in * exp_r)
        self.exp = None
        if w_exp != w_in:
            self.exp = nn.Conv2d(w_in, w_exp, 1, stride=1, padding=0, bias=False)
            self.exp_bn = get_norm(bn_norm, w_exp)
            self.exp_swish = Swish(inplace=True)
        self.dwise = nn.Conv2d(
            w_exp, w_exp, kernel, stride=stride, padding=(kernel - 1) // 2, groups=w_exp, bias=False
        )
        self.dwise_bn = get_norm(bn_norm, w_exp)
        self.dwise_swish = Swish(inplace=True)
        self.se = SE(w_exp, int(w_in * se_r))
        self.lin_proj = nn.Conv2d(w_exp, w_out, 1, stride=1, padding=0, bias=False)
        self.lin_proj_bn = get_norm(bn_norm, w_out)
        self.has_skip = stride == 1 and w_in == w_out
        self.dc_ratio = dc_ratio

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = x
        if self.exp is not None:
            f = self.exp_swish(self.exp_bn(self.exp(f)))
        f = self.se(self.dwise_swish(self.dwise_bn(self.dwise(f))))
        f = self.lin_proj_bn(self.lin_proj(f))
        if not self.has_skip:
            return f
        if self.training and self.dc_ratio > 0.0:
            f = drop_connect(f, self.dc_ratio)
        return x + f


class EffStage(nn.Sequential):
    """``d`` MBConv blocks ``b1``..``bd``; the first takes ``w_in`` and ``stride``."""

    def __init__(
        self,
        w_in: int,
        exp_r: float,
        kernel: int,
        stride: int,
        se_r: float,
        w_out: int,
        d: int,
        bn_norm: NormSpec,
        dc_ratio: float = 0.0,
    ) -> None:
        super().__init__()
        for i in range(d):
            first = i == 0
            block = MBConv(
                w_in if first else w_out,
                exp_r,
                kernel,
                stride if first else 1,
                se_r,
                w_out,
                bn_norm,
                dc_ratio,
            )
            self.add_module(f"b{i + 1}", block)


class StemIN(nn.Module):
    """3x3 conv (stride 2), norm, Swish: keys ``conv``, ``bn``."""

    def __init__(self, w_in: int, w_out: int, bn_norm: NormSpec) -> None:
        super().__init__()
        self.conv = nn.Conv2d(w_in, w_out, 3, stride=2, padding=1, bias=False)
        self.bn = get_norm(bn_norm, w_out)
        self.swish = Swish(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.swish(self.bn(self.conv(x)))


class EffNet(nn.Sequential):
    """Stem, stages ``s1``..``s7``, then the 1x1 head, applied in order.

    Keyword arguments ``stem_w``, ``ds``, ``ws``, ``exp_rs``, ``se_r``, ``ss``, ``ks``, ``head_w``
    (and ``dc_ratio``) give the design (one value per stage for the lists); without them it is read
    from the global config's ``EN`` section.
    """

    @staticmethod
    def get_args() -> dict[str, Any]:
        """The design in the global config's ``EN`` section, as keyword arguments."""
        en = effnet_cfg.EN
        return {
            "stem_w": en.STEM_W,
            "ds": en.DEPTHS,
            "ws": en.WIDTHS,
            "exp_rs": en.EXP_RATIOS,
            "se_r": en.SE_R,
            "ss": en.STRIDES,
            "ks": en.KERNELS,
            "head_w": en.HEAD_W,
            "dc_ratio": en.DC_RATIO,
        }

    def __init__(self, last_stride: int, bn_norm: NormSpec, **kwargs: Any) -> None:
        super().__init__()
        self._construct(**(kwargs or self.get_args()), last_stride=last_stride, bn_norm=bn_norm)
        self.apply(init_weights)

    def _construct(
        self,
        stem_w: int,
        ds: list[int],
        ws: list[int],
        exp_rs: list[float],
        se_r: float,
        ss: list[int],
        ks: list[int],
        head_w: int,
        last_stride: int,
        bn_norm: NormSpec,
        dc_ratio: float = 0.0,
    ) -> None:
        self.stem = StemIN(3, stem_w, bn_norm)
        w_in = stem_w
        for i, (d, w, exp_r, stride, kernel) in enumerate(zip(ds, ws, exp_rs, ss, ks)):
            stride = last_stride if i == _LAST_STRIDE_STAGE else stride
            self.add_module(f"s{i + 1}", EffStage(w_in, exp_r, kernel, stride, se_r, w, d, bn_norm, dc_ratio))
            w_in = w
        self.head = EffHead(w_in, head_w, bn_norm)
        self.out_channels = head_w


def init_pretrained_weights(key: str) -> OrderedDict[str, torch.Tensor]:
    """pycls's published ImageNet weights for DEPTH ``key`` ("b0".."b5") as a state dict,
    downloaded once into TORCH_HOME."""
    return published_state_dict("effnet", key, f"EfficientNet {key}")


@BACKBONE_REGISTRY.register()
def build_effnet_backbone(cfg) -> EffNet:
    """EfficientNet from ``MODEL.BACKBONE.*`` (DEPTH b0..b5, LAST_STRIDE, NORM, PRETRAIN[_PATH])."""
    bb = cfg.MODEL.BACKBONE
    depth = normalize_depth(str(bb.DEPTH).lower(), list(EFFNET_SPECS))
    model = EffNet(bb.LAST_STRIDE, backbone_norm(cfg), **asdict(EFFNET_SPECS[depth]))
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
