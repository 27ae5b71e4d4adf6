"""RegNetX / RegNetY (Radosavovic et al., 2020) as upstream FastReID builds them (pycls's AnyNet).

Keys: ``stem.{conv,bn}``, ``sS.bB.{proj,bn}`` (projection shortcut), ``sS.bB.f.{a,a_bn,b,b_bn,c,c_bn}``
and, for RegNetY, ``sS.bB.f.se.f_ex.{0,2}``. torchvision's RegNet is the same network under other
key names, so it is not reused.

``DEPTH`` names a variant the way upstream does: ``<MF>x`` / ``<MF>y`` for 200, 400, 800, 1600,
3200, 4000 and 6400 MFLOPs. Each variant's design parameters (depth, w0, wa, wm, group width)
are the numbers of pycls's ``RegNet{X,Y}-*_dds_8gpu.yaml`` files that upstream ships; the per-stage
widths and depths are derived from them with RegNet's quantised linear rule (``generate_regnet``,
``get_stages_from_blocks``, ``adjust_ws_gs_comp``). Unlike upstream (which merges each YAML into
the global :data:`.config.cfg`, so a RegNetX built after a RegNetY keeps its SE blocks), every
build passes its own variant's numbers; ``RegNet(last_stride, bn_norm)`` without them reads the
global config as upstream's does. The last stage's stride is ``LAST_STRIDE``.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, cast

import numpy as np
import torch
from torch import nn

from fastreid.layers import get_norm
from fastreid.layers.batch_norm import NormSpec

from ..build import BACKBONE_REGISTRY, backbone_norm
from ..pretrained import load_pretrained_backbone, published_state_dict
from ..pretrained_urls import pretrained_weights_for
from ..resnet import normalize_depth
from .config import cfg as regnet_cfg

__all__ = [
    "RegNet",
    "RegNetSpec",
    "REGNET_SPECS",
    "AnyNet",
    "AnyStage",
    "AnyHead",
    "VanillaBlock",
    "BasicTransform",
    "ResBasicBlock",
    "BottleneckTransform",
    "ResBottleneckBlock",
    "SE",
    "ResStemCifar",
    "ResStemIN",
    "SimpleStemIN",
    "get_stem_fun",
    "get_block_fun",
    "drop_connect",
    "quantize_float",
    "adjust_ws_gs_comp",
    "get_stages_from_blocks",
    "generate_regnet",
    "init_weights",
    "init_pretrained_weights",
    "build_regnet_backbone",
]


@dataclass(frozen=True)
class RegNetSpec:
    """A RegNet variant's design numbers (pycls's ``REGNET`` section)."""

    depth: int
    w0: int
    wa: float
    wm: float
    group_w: int
    se: bool
    stem_w: int = 32
    bot_mul: float = 1.0
    se_ratio: float = 0.25
    stride: int = 2
    stem_type: str = "simple_stem_in"
    block_type: str = "res_bottleneck_block"


REGNET_SPECS: dict[str, RegNetSpec] = {
    "200x": RegNetSpec(13, 24, 36.44, 2.49, 8, False),
    "200y": RegNetSpec(13, 24, 36.44, 2.49, 8, True),
    "400x": RegNetSpec(22, 24, 24.48, 2.54, 16, False),
    "400y": RegNetSpec(16, 48, 27.89, 2.09, 8, True),
    "800x": RegNetSpec(16, 56, 35.73, 2.28, 16, False),
    "800y": RegNetSpec(14, 56, 38.84, 2.4, 16, True),
    "1600x": RegNetSpec(18, 80, 34.01, 2.25, 24, False),
    "1600y": RegNetSpec(27, 48, 20.71, 2.65, 24, True),
    "3200x": RegNetSpec(25, 88, 26.31, 2.25, 48, False),
    "3200y": RegNetSpec(21, 80, 42.63, 2.66, 24, True),
    "4000x": RegNetSpec(23, 96, 38.65, 2.43, 40, False),
    "4000y": RegNetSpec(22, 96, 31.41, 2.24, 64, True),
    "6400x": RegNetSpec(17, 184, 60.83, 2.07, 56, False),
    "6400y": RegNetSpec(25, 112, 33.22, 2.27, 72, True),
}


def _relu() -> nn.ReLU:
    return nn.ReLU(inplace=regnet_cfg.MEM.RELU_INPLACE)


def init_weights(m: nn.Module) -> None:
    """pycls's ResNet-style initialisation: conv ~ N(0, 2 / fan_out); BatchNorm weight 1 (0 for a
    block's last norm with ``BN.ZERO_INIT_FINAL_GAMMA``), bias 0; linear ~ N(0, 0.01), bias 0."""
    if isinstance(m, nn.Conv2d):
        fan_out = m.kernel_size[0] * m.kernel_size[1] * m.out_channels
        nn.init.normal_(m.weight, 0, math.sqrt(2.0 / fan_out))
    elif isinstance(m, nn.BatchNorm2d):
        zero_gamma = getattr(m, "final_bn", False) and regnet_cfg.BN.ZERO_INIT_FINAL_GAMMA
        nn.init.constant_(m.weight, 0.0 if zero_gamma else 1.0)
        nn.init.zeros_(m.bias)
    elif isinstance(m, nn.Linear):
        nn.init.normal_(m.weight, 0, 0.01)
        nn.init.zeros_(m.bias)


def _final_norm(bn_norm: NormSpec, channels: int) -> nn.Module:
    """A block's last norm, marked for ``BN.ZERO_INIT_FINAL_GAMMA``."""
    norm = get_norm(bn_norm, channels)
    cast(Any, norm).final_bn = True  # a plain attribute, read by init_weights
    return norm


def drop_connect(x: torch.Tensor, drop_ratio: float) -> torch.Tensor:
    """Zero each sample with probability ``drop_ratio`` and scale the others by
    ``1 / (1 - drop_ratio)``, in place (DARTS's drop connect); returns ``x``."""
    keep_ratio = 1.0 - drop_ratio
    mask = torch.empty([x.shape[0], 1, 1, 1], dtype=x.dtype, device=x.device).bernoulli_(keep_ratio)
    return x.div_(keep_ratio).mul_(mask)


class AnyHead(nn.Module):
    """Classifier head: global average pool, then a linear layer to ``nc`` classes."""

    def __init__(self, w_in: int, nc: int) -> None:
        super().__init__()
        self.avg_pool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(w_in, nc, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.avg_pool(x).flatten(1))


class VanillaBlock(nn.Module):
    """[3x3 conv, norm, ReLU] x 2, no shortcut (keys ``a``, ``a_bn``, ``b``, ``b_bn``)."""

    def __init__(
        self,
        w_in: int,
        w_out: int,
        stride: int,
        bn_norm: NormSpec,
        bm: float | None = None,
        gw: int | None = None,
        se_r: float | None = None,
    ) -> None:
        if bm is not None or gw is not None or se_r is not None:
            raise ValueError("Vanilla block does not support bm, gw, and se_r options")
        super().__init__()
        self.a = nn.Conv2d(w_in, w_out, kernel_size=3, stride=stride, padding=1, bias=False)
        self.a_bn = get_norm(bn_norm, w_out)
        self.a_relu = _relu()
        self.b = nn.Conv2d(w_out, w_out, kernel_size=3, stride=1, padding=1, bias=False)
        self.b_bn = get_norm(bn_norm, w_out)
        self.b_relu = _relu()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.a_relu(self.a_bn(self.a(x)))
        return self.b_relu(self.b_bn(self.b(x)))


class BasicTransform(nn.Module):
    """3x3 conv, norm, ReLU, 3x3 conv, norm: the residual branch of :class:`ResBasicBlock`."""

    def __init__(self, w_in: int, w_out: int, stride: int, bn_norm: NormSpec) -> None:
        super().__init__()
        self.a = nn.Conv2d(w_in, w_out, kernel_size=3, stride=stride, padding=1, bias=False)
        self.a_bn = get_norm(bn_norm, w_out)
        self.a_relu = _relu()
        self.b = nn.Conv2d(w_out, w_out, kernel_size=3, stride=1, padding=1, bias=False)
        self.b_bn = _final_norm(bn_norm, w_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b_bn(self.b(self.a_relu(self.a_bn(self.a(x)))))


class _Residual(nn.Module):
    """``relu(shortcut(x) + f(x))``; the shortcut is a strided 1x1 projection + norm (``proj``,
    ``bn``) when the shape changes, the identity otherwise."""

    f: nn.Module
    relu: nn.Module

    def _add_shortcut(self, w_in: int, w_out: int, stride: int, bn_norm: NormSpec) -> None:
        self.proj_block = (w_in != w_out) or (stride != 1)
        if self.proj_block:
            self.proj = nn.Conv2d(w_in, w_out, kernel_size=1, stride=stride, padding=0, bias=False)
            self.bn = get_norm(bn_norm, w_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = self.bn(self.proj(x)) if self.proj_block else x
        return self.relu(shortcut + self.f(x))


class ResBasicBlock(_Residual):
    """Residual basic block: ``x + BasicTransform(x)``."""

    def __init__(
        self,
        w_in: int,
        w_out: int,
        stride: int,
        bn_norm: NormSpec,
        bm: float | None = None,
        gw: int | None = None,
        se_r: float | None = None,
    ) -> None:
        if bm is not None or gw is not None or se_r is not None:
            raise ValueError("Basic transform does not support bm, gw, and se_r options")
        super().__init__()
        self._add_shortcut(w_in, w_out, stride, bn_norm)
        self.f = BasicTransform(w_in, w_out, stride, bn_norm)
        self.relu = _relu()


class SE(nn.Module):
    """Squeeze-and-excitation: average pool, 1x1 conv to ``w_se``, ReLU, 1x1 conv back, sigmoid
    gate (keys ``f_ex.0``, ``f_ex.2``)."""

    def __init__(self, w_in: int, w_se: int) -> None:
        super().__init__()
        self.avg_pool = nn.AdaptiveAvgPool2d((1, 1))
        self.f_ex = nn.Sequential(
            nn.Conv2d(w_in, w_se, kernel_size=1, bias=True),
            _relu(),
            nn.Conv2d(w_se, w_in, kernel_size=1, bias=True),
            nn.Sigmoid(),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.f_ex(self.avg_pool(x))


class BottleneckTransform(nn.Module):
    """1x1, grouped 3x3 (stride; groups of ``gw`` channels), optional SE (``se_r`` of the input
    width), 1x1; bottleneck width ``w_out * bm``. Keys ``a``, ``b``, ``se``, ``c`` with norms."""

    def __init__(
        self, w_in: int, w_out: int, stride: int, bn_norm: NormSpec, bm: float, gw: int, se_r: float | None
    ) -> None:
        super().__init__()
        w_b = int(round(w_out * bm))
        self.a = nn.Conv2d(w_in, w_b, kernel_size=1, stride=1, padding=0, bias=False)
        self.a_bn = get_norm(bn_norm, w_b)
        self.a_relu = _relu()
        self.b = nn.Conv2d(w_b, w_b, kernel_size=3, stride=stride, padding=1, groups=w_b // gw, bias=False)
        self.b_bn = get_norm(bn_norm, w_b)
        self.b_relu = _relu()
        self.se = SE(w_b, int(round(w_in * se_r))) if se_r else None
        self.c = nn.Conv2d(w_b, w_out, kernel_size=1, stride=1, padding=0, bias=False)
        self.c_bn = _final_norm(bn_norm, w_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.b_relu(self.b_bn(self.b(self.a_relu(self.a_bn(self.a(x))))))
        if self.se is not None:
            x = self.se(x)
        return self.c_bn(self.c(x))


class ResBottleneckBlock(_Residual):
    """Residual bottleneck block: ``x + BottleneckTransform(x)``."""

    def __init__(
        self,
        w_in: int,
        w_out: int,
        stride: int,
        bn_norm: NormSpec,
        bm: float = 1.0,
        gw: int = 1,
        se_r: float | None = None,
    ) -> None:
        super().__init__()
        self._add_shortcut(w_in, w_out, stride, bn_norm)
        self.f = BottleneckTransform(w_in, w_out, stride, bn_norm, bm, gw, se_r)
        self.relu = _relu()


class _Stem(nn.Module):
    """conv, norm, ReLU (keys ``conv``, ``bn``)."""

    def __init__(self, conv: nn.Conv2d, bn_norm: NormSpec) -> None:
        super().__init__()
        self.conv = conv
        self.bn = get_norm(bn_norm, conv.out_channels)
        self.relu = _relu()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.bn(self.conv(x)))


class ResStemCifar(_Stem):
    """3x3 conv (stride 1), norm, ReLU."""

    def __init__(self, w_in: int, w_out: int, bn_norm: NormSpec) -> None:
        super().__init__(nn.Conv2d(w_in, w_out, kernel_size=3, stride=1, padding=1, bias=False), bn_norm)


class ResStemIN(_Stem):
    """ResNet's ImageNet stem: 7x7 conv (stride 2), norm, ReLU, 3x3 max pool (stride 2)."""

    def __init__(self, w_in: int, w_out: int, bn_norm: NormSpec) -> None:
        super().__init__(nn.Conv2d(w_in, w_out, kernel_size=7, stride=2, padding=3, bias=False), bn_norm)
        self.pool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(super().forward(x))


class SimpleStemIN(_Stem):
    """3x3 conv (stride 2), norm, ReLU: keys ``conv``, ``bn``."""

    def __init__(self, in_w: int, out_w: int, bn_norm: NormSpec) -> None:
        super().__init__(nn.Conv2d(in_w, out_w, kernel_size=3, stride=2, padding=1, bias=False), bn_norm)


_STEMS: dict[str, Callable[..., nn.Module]] = {
    "res_stem_cifar": ResStemCifar,
    "res_stem_in": ResStemIN,
    "simple_stem_in": SimpleStemIN,
}
_BLOCKS: dict[str, Callable[..., nn.Module]] = {
    "vanilla_block": VanillaBlock,
    "res_basic_block": ResBasicBlock,
    "res_bottleneck_block": ResBottleneckBlock,
}


def get_stem_fun(stem_type: str) -> Callable[..., nn.Module]:
    """The stem class called ``stem_type`` (pycls's names)."""
    if stem_type not in _STEMS:
        raise ValueError(f"Stem type '{stem_type}' not supported; expected one of {', '.join(_STEMS)}")
    return _STEMS[stem_type]


def get_block_fun(block_type: str) -> Callable[..., nn.Module]:
    """The block class called ``block_type`` (pycls's names)."""
    if block_type not in _BLOCKS:
        raise ValueError(f"Block type '{block_type}' not supported; expected one of {', '.join(_BLOCKS)}")
    return _BLOCKS[block_type]


class AnyStage(nn.Sequential):
    """``d`` blocks ``b1``..``bd`` of width ``w_out``; the first takes ``w_in`` and ``stride``."""

    def __init__(
        self,
        w_in: int,
        w_out: int,
        stride: int,
        bn_norm: NormSpec,
        d: int,
        block_fun: Callable[..., nn.Module],
        bm: float | None,
        gw: int | None,
        se_r: float | None,
    ) -> None:
        super().__init__()
        for i in range(d):
            first = i == 0
            self.add_module(
                f"b{i + 1}",
                block_fun(w_in if first else w_out, w_out, stride if first else 1, bn_norm, bm, gw, se_r),
            )


class AnyNet(nn.Sequential):
    """Stem, then stages ``s1``..``sN``, applied in order (pycls's AnyNet without its head).

    Keyword arguments ``stem_type``, ``stem_w``, ``block_type``, ``ds``, ``ws``, ``ss``, ``bn_norm``,
    ``bms``, ``gws``, ``se_r`` give the design (one value per stage for the lists); without them it
    is read from the global config's ``ANYNET`` section.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__()
        if not kwargs:
            a = regnet_cfg.ANYNET
            kwargs = {
                "stem_type": a.STEM_TYPE,
                "stem_w": a.STEM_W,
                "block_type": a.BLOCK_TYPE,
                "ds": a.DEPTHS,
                "ws": a.WIDTHS,
                "ss": a.STRIDES,
                "bn_norm": a.get("BN_NORM", "BN"),
                "bms": a.BOT_MULS,
                "gws": a.GROUP_WS,
                "se_r": a.SE_R if a.SE_ON else None,
            }
        self._construct(**kwargs)
        self.apply(init_weights)

    def _construct(
        self,
        stem_type: str,
        stem_w: int,
        block_type: str,
        ds: list[int],
        ws: list[int],
        ss: list[int],
        bn_norm: NormSpec,
        bms: list[float] | None,
        gws: list[int] | None,
        se_r: float | None,
    ) -> None:
        bms = bms or [1.0 for _ in ds]
        gws = gws or [1 for _ in ds]
        self.stem = get_stem_fun(stem_type)(3, stem_w, bn_norm)
        block_fun = get_block_fun(block_type)
        w_in = stem_w
        for i, (d, w, s, bm, gw) in enumerate(zip(ds, ws, ss, bms, gws)):
            self.add_module(f"s{i + 1}", AnyStage(w_in, w, s, bn_norm, d, block_fun, bm, gw, se_r))
            w_in = w
        self.in_planes = self.out_channels = w_in


def quantize_float(f: float, q: int) -> int:
    """The multiple of ``q`` closest to ``f``."""
    return int(round(f / q) * q)


def adjust_ws_gs_comp(ws: list[int], bms: list[float], gs: list[int]) -> tuple[list[int], list[int]]:
    """Stage widths made compatible with their group widths: each bottleneck width rounded to a
    multiple of its group width (capped at the bottleneck width)."""
    ws_bot = [int(w * b) for w, b in zip(ws, bms)]
    gs = [min(g, w_bot) for g, w_bot in zip(gs, ws_bot)]
    ws_bot = [quantize_float(w_bot, g) for w_bot, g in zip(ws_bot, gs)]
    ws = [int(w_bot / b) for w_bot, b in zip(ws_bot, bms)]
    return ws, gs


def get_stages_from_blocks(ws: list[int], rs: list[Any]) -> tuple[list[int], list[int]]:
    """Per-block widths ``ws`` (and a second per-block property ``rs``) as per-stage widths and
    depths: a new stage starts wherever either changes."""
    starts = [i for i in range(len(ws)) if i == 0 or ws[i] != ws[i - 1] or rs[i] != rs[i - 1]]
    s_ws = [ws[i] for i in starts]
    s_ds = np.diff(starts + [len(ws)]).tolist()
    return s_ws, s_ds


def generate_regnet(
    w_a: float, w_0: int, w_m: float, d: int, q: int = 8
) -> tuple[list[int], int, float, list[float]]:
    """Per-block widths of a RegNet: the linear widths ``w_0 + w_a * i`` (i < ``d``) snapped to the
    nearest power ``w_0 * w_m^k`` and to a multiple of ``q``. Returns (widths, number of stages,
    largest k + 1, the continuous widths)."""
    if not (w_a >= 0 and w_0 > 0 and w_m > 1 and w_0 % q == 0):
        raise ValueError(f"RegNet needs w_a >= 0, w_0 > 0, w_m > 1 and w_0 a multiple of {q}")
    ws_cont = np.arange(d) * w_a + w_0
    ks = np.round(np.log(ws_cont / w_0) / np.log(w_m))
    ws = np.round(np.divide(w_0 * np.power(w_m, ks), q)) * q
    num_stages, max_stage = len(np.unique(ws)), ks.max() + 1
    return ws.astype(int).tolist(), num_stages, max_stage, ws_cont.tolist()


def _spec_from_cfg() -> RegNetSpec:
    r = regnet_cfg.REGNET
    return RegNetSpec(
        r.DEPTH,
        r.W0,
        r.WA,
        r.WM,
        r.GROUP_W,
        r.SE_ON,
        stem_w=r.STEM_W,
        bot_mul=r.BOT_MUL,
        se_ratio=r.SE_R,
        stride=r.STRIDE,
        stem_type=r.STEM_TYPE,
        block_type=r.BLOCK_TYPE,
    )


class RegNet(AnyNet):
    """A RegNet: ``spec``'s design (the global config's ``REGNET`` section without one), the last
    stage with stride ``last_stride``."""

    def __init__(self, last_stride: int, bn_norm: NormSpec, spec: RegNetSpec | None = None) -> None:
        spec = spec or _spec_from_cfg()
        block_ws, num_stages, _, _ = generate_regnet(spec.wa, spec.w0, spec.wm, spec.depth)
        ws, ds = get_stages_from_blocks(block_ws, block_ws)
        bms = [spec.bot_mul] * num_stages
        ws, gws = adjust_ws_gs_comp(ws, bms, [spec.group_w] * num_stages)
        ss = [spec.stride] * num_stages
        ss[-1] = last_stride
        super().__init__(
            stem_type=spec.stem_type,
            stem_w=spec.stem_w,
            block_type=spec.block_type,
            ds=ds,
            ws=ws,
            ss=ss,
            bn_norm=bn_norm,
            bms=bms,
            gws=gws,
            se_r=spec.se_ratio if spec.se else None,
        )


def init_pretrained_weights(key: str) -> OrderedDict[str, torch.Tensor]:
    """pycls's published ImageNet weights for DEPTH ``key`` ("200x".."6400y") as a state dict,
    downloaded once into TORCH_HOME."""
    return published_state_dict("regnet", key, f"RegNet {key}")


@BACKBONE_REGISTRY.register()
def build_regnet_backbone(cfg) -> RegNet:
    """RegNet from ``MODEL.BACKBONE.*`` (DEPTH e.g. "800y", LAST_STRIDE, NORM, PRETRAIN[_PATH])."""
    bb = cfg.MODEL.BACKBONE
    depth = normalize_depth(bb.DEPTH, list(REGNET_SPECS))
    model = RegNet(bb.LAST_STRIDE, backbone_norm(cfg), REGNET_SPECS[depth])
    if bb.PRETRAIN:
        name = f"RegNet{depth[-1].upper()}-{depth[:-1]}MF"
        load_pretrained_backbone(
            model,
            bb.PRETRAIN_PATH,
            None,
            name,
            drop_prefixes=("head.",),
            source=pretrained_weights_for("regnet", depth),
        )
    return model
