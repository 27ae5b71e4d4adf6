"""Calls of upstream FastReID's public layers, losses and backbone building blocks, written once and
run on two packages: ``data/make_upstream_api_reference.py`` runs them with upstream's ``fastreid``
first on ``sys.path`` and records what they return (``data/upstream/api_reference.pt``);
``test_upstream_api_reference.py`` runs them on this package and compares. Each case uses only
upstream's API (names, signatures), so the same code drives both.

Every case returns a flat dict: ``name -> tensor`` (compared in float64 to ``RELATIVE_TOLERANCE``
of the magnitudes), or ``name -> str/int/float/list`` (compared exactly). Modules get the
deterministic weights of ``upstream_reference.deterministic_state_dict`` and run in float64;
inputs come from numpy's generator. Cases that draw random numbers seed torch first, so both
sides draw the same numbers on the same machine.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn
from upstream_reference import REFERENCE_DTYPE, deterministic_state_dict

from fastreid.layers import (
    activation,
    any_softmax,
    batch_norm,
    context_block,
    drop,
    frn,
    helpers,
    pooling,
    se_layer,
    splat,
    weight_init,
)
from fastreid.modeling import losses
from fastreid.modeling.backbones import mobilenet, mobilenetv3, osnet, repvgg, resnest, resnet, resnext
from fastreid.modeling.backbones import vision_transformer as vit
from fastreid.modeling.backbones.regnet import config as regnet_config
from fastreid.modeling.backbones.regnet import effnet, regnet
from fastreid.modeling.losses import utils as loss_utils
from fastreid.utils.events import EventStorage

# the package's ``triplet_loss`` attribute is the function; the module by its full name
triplet = importlib.import_module("fastreid.modeling.losses.triplet_loss")

Result = dict[str, Any]
CASES: dict[str, Callable[[], Result]] = {}


def case(fn: Callable[[], Result]) -> Callable[[], Result]:
    CASES[fn.__name__] = fn
    return fn


def x_(*shape: int, seed: int = 0, low: float | None = None, high: float | None = None) -> torch.Tensor:
    """A float64 input: standard normal, or uniform in [low, high)."""
    g = np.random.default_rng(seed)
    if low is None:
        return torch.from_numpy(g.standard_normal(shape))
    return torch.from_numpy(g.uniform(low, high, shape))


def filled(module: nn.Module) -> nn.Module:
    """``module`` in float64 eval mode with the deterministic reference weights."""
    keys = {k: (tuple(v.shape), v.dtype) for k, v in module.state_dict().items()}
    module.load_state_dict(deterministic_state_dict(keys))
    return module.to(REFERENCE_DTYPE).eval()


def keys_of(module: nn.Module) -> list[str]:
    """``key shape`` lines of a state dict, sorted."""
    return sorted(f"{k} {'x'.join(map(str, v.shape)) or 'scalar'}" for k, v in module.state_dict().items())


MAX_SAMPLES = 256


def summary(prefix: str, out: torch.Tensor) -> Result:
    """An output as at most ``MAX_SAMPLES`` evenly spaced values plus its sum and sum of magnitudes
    (every position counts in those), and its shape."""
    flat = out.detach().reshape(-1).to(REFERENCE_DTYPE)
    positions = torch.linspace(0, flat.numel() - 1, min(flat.numel(), MAX_SAMPLES)).round().long()
    sums = torch.stack([flat.sum(), flat.abs().sum()])
    return {f"{prefix}.values": flat[positions], f"{prefix}.sums": sums, f"{prefix}.shape": list(out.shape)}


def module_result(prefix: str, module: nn.Module, *inputs: Any) -> Result:
    """Keys and shapes of ``module`` and its eval output (deterministic weights) on ``inputs``."""
    module = filled(module)
    with torch.no_grad():
        out = module(*inputs)
    return {f"{prefix}.keys": keys_of(module), **summary(prefix, out)}


def types_of(module: nn.Module) -> list[str]:
    return [f"{name} {type(m).__name__}" for name, m in module.named_modules() if name]


# ---------------------------------------------------------------------------------------------
# fastreid.layers
# ---------------------------------------------------------------------------------------------


@case
def layers_activation() -> Result:
    out: Result = {}
    for name in ("Mish", "Swish", "MemoryEfficientSwish", "GELU"):
        x = x_(2, 3, 4, 4).requires_grad_()
        y = getattr(activation, name)()(x)
        (grad,) = torch.autograd.grad((y * x_(2, 3, 4, 4, seed=1)).sum(), x)
        out[name] = y.detach()
        out[f"{name}.grad"] = grad
    return out


@case
def layers_batch_norm() -> Result:
    out: Result = {}
    ghost = batch_norm.GhostBatchNorm(4, num_splits=2).to(REFERENCE_DTYPE).train()
    out["ghost.train"] = ghost(x_(8, 4, 3, 3) * 2 + 1)
    out["ghost.running_mean"] = ghost.running_mean.clone()
    out["ghost.running_var"] = ghost.running_var.clone()
    out["ghost.eval"] = ghost.eval()(x_(8, 4, 3, 3, seed=1))
    ibn = batch_norm.IBN(6, "BN").to(REFERENCE_DTYPE).train()
    out["ibn.train"] = ibn(x_(4, 6, 3, 3) * 3)
    frozen = batch_norm.FrozenBatchNorm(5).to(REFERENCE_DTYPE)
    out["frozen.keys"] = keys_of(frozen)
    out["frozen.identity"] = frozen(x_(2, 5, 3, 3))
    source = filled(nn.Sequential(nn.Conv2d(3, 5, 1), nn.BatchNorm2d(5), nn.Sequential(nn.BatchNorm2d(5))))
    converted = batch_norm.FrozenBatchNorm.convert_frozen_batchnorm(source)
    out["frozen.converted_types"] = types_of(converted)
    out["frozen.converted"] = converted.train()(x_(2, 3, 4, 4))
    out["get_norm.types"] = [
        type(batch_norm.get_norm(name, 32)).__name__ for name in ("BN", "syncBN", "GhostBN", "FrozenBN", "GN")
    ]
    bn = batch_norm.get_norm("BN", 3, bias_freeze=True, weight_init=0.5, bias_init=0.25)
    out["get_norm.bn"] = [
        bn.weight.requires_grad,
        bn.bias.requires_grad,
        float(bn.weight[0].detach()),
        float(bn.bias[0].detach()),
    ]
    return out


@case
def layers_context_block() -> Result:
    out: Result = {}
    for pooling_type, fusions in (("att", ("channel_add", "channel_mul")), ("avg", ("channel_mul",))):
        block = context_block.ContextBlock(8, 0.25, pooling_type, fusions)
        out.update(module_result(f"{pooling_type}", block, x_(2, 8, 5, 4)))
    fresh = context_block.ContextBlock(8, 0.5)
    out["fresh_is_identity"] = bool(torch.equal(fresh(x_(1, 8, 3, 3).float()), x_(1, 8, 3, 3).float()))
    return out


@case
def layers_drop() -> Result:
    out: Result = {}
    x = x_(1, 2, 9, 9)
    for fn in ("drop_block_2d", "drop_block_fast_2d"):
        for batchwise in (False, True):
            for with_noise in (False, True):
                for block_size in (3, 7):
                    torch.manual_seed(11)
                    y = getattr(drop, fn)(x.clone(), 0.3, block_size, 1.0, with_noise, False, batchwise)
                    out[f"{fn}.b{int(batchwise)}.n{int(with_noise)}.k{block_size}"] = y
    for fast in (True, False):
        module = drop.DropBlock2d(0.2, 3, fast=fast).train()
        torch.manual_seed(3)
        out[f"DropBlock2d.fast{int(fast)}"] = module(x.clone())
        out[f"DropBlock2d.fast{int(fast)}.eval"] = module.eval()(x)
    out["drop_path.eval"] = drop.drop_path(x, 0.5, training=False)
    out["DropPath.p0"] = drop.DropPath(0.0).train()(x)
    return out


def _bn_relu_net() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.Conv2d(4, 6, 1),
        nn.BatchNorm2d(6),
        nn.LeakyReLU(),
        nn.Sequential(nn.Conv2d(6, 6, 1), nn.BatchNorm2d(6), nn.ReLU()),
        nn.Conv2d(6, 5, 1),
        nn.BatchNorm2d(5),
    )


@case
def layers_frn() -> Result:
    out: Result = {}
    for learnable in (False, True):
        norm = frn.FRN(4, eps=1e-3, is_eps_leanable=learnable)
        out.update(module_result(f"frn{int(learnable)}", norm, x_(2, 4, 3, 5)))
    out.update(module_result("tlu", frn.TLU(4), x_(2, 4, 3, 5)))
    out["bnrelu_to_frn"] = types_of(frn.bnrelu_to_frn(_bn_relu_net()))
    # upstream's bnrelu_to_frn2 fails on nested Sequentials: flat models here
    for name, net in (
        ("flat", nn.Sequential(*_bn_relu_net()[:6], nn.Conv2d(6, 5, 1))),
        ("module", _ConvBnRelu()),
    ):
        torch.manual_seed(0)
        out[f"bnrelu_to_frn2.{name}"] = types_of(frn.bnrelu_to_frn2(net, input_size=(3, 8, 8)))
    return out


class _ConvBnRelu(nn.Module):
    """BN + ReLU run one after the other though not registered side by side; a last BN alone."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 4, 1)
        self.relu = nn.ReLU()
        self.bn2 = nn.BatchNorm2d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn2(self.conv2(self.relu(self.bn(self.conv(x)))))


@case
def layers_helpers() -> Result:
    grid = [(v, d, m) for v in (3, 7.5, 16, 30, 33.3, 100, 250) for d in (4, 8, 16) for m in (None, 24)]
    return {
        "make_divisible": [helpers.make_divisible(v, d, m) for v, d, m in grid],
        "to_2tuple": [list(helpers.to_2tuple(3)), list(helpers.to_2tuple((1, 2)))],
        "to_ntuple": list(helpers.to_ntuple(3)(5)),
    }


@case
def layers_pooling() -> Result:
    x = x_(2, 3, 4, 5, low=0.0, high=2.0)
    out: Result = {}
    for name, args in (
        ("Identity", ()),
        ("Flatten", ()),
        ("GlobalAvgPool", ()),
        ("GlobalMaxPool", ()),
        ("GeneralizedMeanPooling", (4,)),
        ("GeneralizedMeanPoolingP", ()),
        ("FastGlobalAvgPool", (True,)),
        ("AdaptiveAvgMaxPool", ()),
        ("ClipGlobalAvgPool", ()),
    ):
        layer = getattr(pooling, name)(*args).to(REFERENCE_DTYPE)
        out[name] = layer(x).detach()
    return out


@case
def layers_se_and_splat() -> Result:
    out = module_result("se", se_layer.SELayer(16, 4), x_(2, 16, 3, 3))
    out.update(
        module_result(
            "splat_r2g2",
            splat.SplAtConv2d(8, 4, 3, padding=1, groups=2, bias=False, radix=2, norm_layer="BN"),
            x_(2, 8, 5, 5),
        )
    )
    out.update(
        module_result("splat_r1", splat.SplAtConv2d(8, 8, 3, stride=2, padding=1, radix=1), x_(2, 8, 5, 5))
    )
    out["rsoftmax_r2"] = splat.rSoftMax(2, 2)(x_(2, 16))
    out["rsoftmax_r1"] = splat.rSoftMax(1, 2)(x_(2, 16))
    return out


@case
def layers_weight_init() -> Result:
    # trunc_normal_ (so the "truncated_normal" distribution and lecun_normal_) is torch's, which
    # draws differently from upstream's copy: test_layers.py checks its distribution instead
    out: Result = {}
    for mode in ("fan_in", "fan_out", "fan_avg"):
        for distribution in ("normal", "uniform"):
            torch.manual_seed(1)
            tensor = torch.empty(8, 4, 3, 3, dtype=REFERENCE_DTYPE)
            weight_init.variance_scaling_(tensor, 2.0, mode, distribution)
            out[f"variance_scaling_.{mode}.{distribution}"] = tensor
    torch.manual_seed(3)
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Linear(4, 5)).to(REFERENCE_DTYPE)
    net.apply(weight_init.weights_init_kaiming)
    out.update({f"kaiming.{k}": v for k, v in net.state_dict().items() if v.is_floating_point()})
    torch.manual_seed(4)
    head = nn.Linear(6, 3).to(REFERENCE_DTYPE)
    head.apply(weight_init.weights_init_classifier)
    out.update({f"classifier.{k}": v for k, v in head.state_dict().items()})
    return out


@case
def layers_any_softmax() -> Result:
    logits = x_(6, 5, low=-0.8, high=0.8)
    targets = torch.tensor([0, 2, -1, 4, 1, -1])
    out: Result = {}
    for name, scale, margin in (
        ("Linear", 2.0, 0.3),
        ("CosSoftmax", 30.0, 0.35),
        ("ArcSoftmax", 30.0, 0.5),
        ("CircleSoftmax", 64.0, 0.25),
    ):
        layer = getattr(any_softmax, name)(5, scale, margin)
        out[name] = layer(logits.clone(), targets)  # upstream's layers work in place
        out[f"{name}.s"] = float(layer.s)
    return out


# ---------------------------------------------------------------------------------------------
# fastreid.modeling.losses
# ---------------------------------------------------------------------------------------------

TARGETS = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])


@case
def losses_classification() -> Result:
    logits = x_(8, 6) * 3
    out: Result = {}
    for eps in (0.0, 0.1, -1.0):
        out[f"cross_entropy.eps{eps}"] = losses.cross_entropy_loss(logits, TARGETS, eps, 0.3)
    for reduction in ("mean", "sum", "none"):
        out[f"focal.{reduction}"] = losses.focal_loss(logits, TARGETS, 0.25, 2.0, reduction)
    with EventStorage(0) as storage:
        losses.log_accuracy(logits, torch.tensor([0, 1, 2, 3, 4, 5, 0, 1]))  # upstream fails for k > 1
        out["log_accuracy"] = float(storage.history("cls_accuracy").latest())
    return out


@case
def losses_metric() -> Result:
    emb = x_(8, 5)
    out: Result = {}
    for norm_feat in (False, True):
        for hard_mining in (False, True):
            for margin in (0.0, 0.3):
                key = f"triplet.n{int(norm_feat)}.h{int(hard_mining)}.m{margin}"
                out[key] = losses.triplet_loss(emb, TARGETS, margin, norm_feat, hard_mining)
    dist = loss_utils.euclidean_dist(emb, emb)
    is_pos = TARGETS.view(8, 1).eq(TARGETS.view(1, 8)).float()
    is_neg = 1 - is_pos
    out["hard_example_mining"] = torch.stack(triplet.hard_example_mining(dist, is_pos, is_neg))
    out["weighted_example_mining"] = torch.stack(triplet.weighted_example_mining(dist, is_pos, is_neg))
    out["softmax_weights"] = triplet.softmax_weights(dist * is_pos, is_pos)
    out["circle"] = losses.pairwise_circleloss(emb, TARGETS, 0.25, 64.0)
    out["cosface"] = losses.pairwise_cosface(emb, TARGETS, 0.35, 30.0)
    out["cosine_dist"] = loss_utils.cosine_dist(emb, emb[:3])
    out["euclidean_dist"] = loss_utils.euclidean_dist(emb, emb[:3])
    out["normalize"] = loss_utils.normalize(emb, axis=0)
    return out


# ---------------------------------------------------------------------------------------------
# fastreid.modeling.backbones
# ---------------------------------------------------------------------------------------------


@case
def backbones_regnet_design() -> Result:
    out: Result = {}
    for w_a, w_0, w_m, d in ((36.44, 24, 2.49, 13), (27.89, 48, 2.09, 16), (60.83, 184, 2.07, 17)):
        ws, num_stages, max_stage, ws_cont = regnet.generate_regnet(w_a, w_0, w_m, d)
        s_ws, s_ds = regnet.get_stages_from_blocks(ws, ws)
        adjusted = regnet.adjust_ws_gs_comp(s_ws, [1.0] * len(s_ws), [24] * len(s_ws))
        out[f"{w_0}"] = [ws, num_stages, float(max_stage), s_ws, s_ds, [list(a) for a in adjusted]]
        out[f"{w_0}.ws_cont"] = torch.tensor(ws_cont, dtype=REFERENCE_DTYPE)
    out["quantize_float"] = [regnet.quantize_float(f, q) for f in (7.0, 12.5, 33.3) for q in (4, 8)]
    out["get_stages_from_blocks.rs"] = [
        list(s) for s in regnet.get_stages_from_blocks([8, 8, 16, 16], [1, 2, 2, 2])
    ]
    return out


def _as_dict(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _as_dict(v) for k, v in sorted(node.items())}
    return list(node) if isinstance(node, tuple) else node


@case
def backbones_regnet_config() -> Result:
    return {"cfg": repr(_as_dict(regnet_config.cfg))}


@case
def backbones_regnet_blocks() -> Result:
    x = x_(2, 8, 8, 6)
    out: Result = {}
    out.update(module_result("vanilla", regnet.VanillaBlock(8, 16, 2, "BN"), x))
    out.update(module_result("res_basic", regnet.ResBasicBlock(8, 16, 2, "BN"), x))
    out.update(module_result("res_basic_id", regnet.ResBasicBlock(8, 8, 1, "BN"), x))
    out.update(module_result("bottleneck_se", regnet.ResBottleneckBlock(8, 16, 2, "BN", 0.5, 4, 0.25), x))
    out.update(module_result("stem_in", regnet.ResStemIN(3, 8, "BN"), x_(2, 3, 16, 12)))
    out.update(module_result("stem_cifar", regnet.ResStemCifar(3, 8, "BN"), x_(2, 3, 16, 12)))
    out.update(module_result("stem_simple", regnet.SimpleStemIN(3, 8, "BN"), x_(2, 3, 16, 12)))
    out.update(module_result("head", regnet.AnyHead(8, 5), x))
    anynet = regnet.AnyNet(
        stem_type="res_stem_in",
        stem_w=8,
        block_type="res_bottleneck_block",
        ds=[1, 2],
        ws=[16, 24],
        ss=[1, 2],
        bn_norm="BN",
        bms=[0.5, 1.0],
        gws=[4, 8],
        se_r=0.25,
    )
    out.update(module_result("anynet", anynet, x_(2, 3, 32, 16)))
    return out


@case
def backbones_effnet() -> Result:
    x = x_(2, 8, 8, 6)
    out = module_result("mbconv", effnet.MBConv(8, 4, 5, 1, 0.25, 8, "BN"), x)
    out.update(module_result("mbconv_s2", effnet.MBConv(8, 1, 3, 2, 0.5, 12, "BN"), x))
    out.update(module_result("stage", effnet.EffStage(8, 6, 3, 2, 0.25, 16, 2, "BN"), x))
    out.update(module_result("stem", effnet.StemIN(3, 8, "BN"), x_(2, 3, 16, 12)))
    out.update(module_result("head", effnet.EffHead(8, 24, "BN"), x))
    out.update(module_result("se", effnet.SE(8, 2), x))
    design = {
        "stem_w": 8,
        "ds": [1, 2],
        "ws": [8, 16],
        "exp_rs": [1, 6],
        "se_r": 0.25,
        "ss": [1, 2],
        "ks": [3, 5],
        "head_w": 32,
    }
    out.update(module_result("effnet", effnet.EffNet(1, "BN", **design), x_(2, 3, 32, 16)))
    return out


@case
def backbones_repvgg() -> Result:
    model = filled(repvgg.RepVGG(2, "BN", [1, 2, 2, 1], [0.25, 0.25, 0.25, 0.5], {2: 2, 4: 2}))
    x = x_(2, 3, 64, 32)
    out: Result = {"train.keys": keys_of(model)}
    with torch.no_grad():
        out.update(summary("train", model(x)))
        model.deploy(True)
        out.update(summary("deployed", model(x)))
    out["deployed.keys"] = keys_of(model)
    out.update(summary("deployed.stage2.1.fused_weight", model.stage2[1].fused_weight))
    out["deployed.stage2.1.fused_bias"] = model.stage2[1].fused_bias.detach()
    out["conv_bn.keys"] = keys_of(repvgg.conv_bn("BN", 4, 8, 3, 2, 1, groups=2))
    b2g4 = repvgg.create_RepVGG_B2g4(2, "BN")
    out["B2g4.blocks"] = [
        [name, m.in_channels, m.rbr_dense.conv.out_channels, m.stride, m.groups]
        for name, m in b2g4.named_modules()
        if isinstance(m, repvgg.RepVGGBlock)
    ]
    return out


@case
def backbones_resnest() -> Result:
    x = x_(2, 3, 32, 32)
    out: Result = {}
    grouped = resnest.ResNeSt(
        2, resnest.Bottleneck, [1, 1, 1, 1], radix=1, groups=2, bottleneck_width=32, avd=True, avd_first=True
    )
    out.update(module_result("grouped", grouped, x))
    plain = resnest.ResNeSt(
        2, resnest.Bottleneck, [1, 2, 1, 1], radix=0, dilated=True, deep_stem=True, stem_width=16
    )
    out.update(module_result("plain_dilated", plain, x))
    block = resnest.Bottleneck(64, 16, 1, radix=2, norm_layer="BN", last_gamma=True)
    out["last_gamma"] = block.bn3.weight.detach().clone()
    out["short_hash"] = [
        resnest.short_hash(n) for n in ("resnest50", "resnest101", "resnest200", "resnest269")
    ]
    return out


@case
def backbones_resnet_resnext() -> Result:
    x = x_(2, 16, 6, 4)
    out = module_result("basic_ibn_se", resnet.BasicBlock(16, 16, "BN", True, True, reduction=4), x)
    down = nn.Sequential(nn.Conv2d(16, 64, 1, stride=2, bias=False), nn.BatchNorm2d(64))
    out.update(module_result("bottleneck_se", resnet.Bottleneck(16, 16, "BN", False, True, 2, down, 8), x))
    out.update(
        module_result("resnext_block", resnext.Bottleneck(64, 16, "BN", True, 8, 4, 1, None), x_(2, 64, 6, 4))
    )
    model = resnext.ResNeXt(2, "BN", True, True, resnext.Bottleneck, [1, 1, 2, 1], [0, 1, 1, 0], 8, 4)
    out.update(module_result("resnext", model, x_(1, 3, 64, 32)))
    return out


@case
def backbones_osnet() -> Result:
    x = x_(2, 32, 4, 3)
    out: Result = {}
    for name, kwargs in (
        ("default", {}),
        ("gates", {"num_gates": 1, "return_gates": True, "gate_activation": "linear", "reduction": 8}),
        ("relu_ln", {"gate_activation": "relu", "layer_norm": True}),
    ):
        out.update(module_result(f"gate_{name}", osnet.ChannelGate(32, **kwargs), x))
    out.update(module_result("conv3x3", osnet.Conv3x3(32, 16, "BN", 2, 2), x))
    out.update(module_result("conv1x1_linear", osnet.Conv1x1Linear(32, 16, "BN", 2), x))
    out.update(module_result("conv1x1", osnet.Conv1x1(32, 16, "BN", 1, 4), x))
    out.update(module_result("conv_layer", osnet.ConvLayer(32, 16, 3, "BN", 1, 1, 2, IN=True), x))
    model = osnet.OSNet([osnet.OSBlock] * 3, [1, 2, 1], [16, 64, 96, 128], "BN", IN=True)
    out.update(module_result("osnet", model, x_(1, 3, 64, 32)))
    return out


@case
def backbones_mobilenet() -> Result:
    x = x_(2, 8, 6, 4)
    out = module_result("conv_3x3_bn", mobilenet.conv_3x3_bn(8, 16, 2, "BN"), x)
    out.update(module_result("conv_1x1_bn", mobilenet.conv_1x1_bn(8, 16, "BN"), x))
    out.update(module_result("v3.conv_1x1_bn", mobilenetv3.conv_1x1_bn(8, 16, "BN"), x))
    out.update(module_result("v3.se", mobilenetv3.SqueezeExcitation(24, 3), x_(2, 24, 3, 3)))
    conv = mobilenetv3.ConvBNActivation(8, 16, 5, 2, 2, "BN", nn.Hardswish, 2)
    out.update(module_result("v3.conv_bn_act", conv, x))
    config = functools.partial(mobilenetv3.InvertedResidualConfig, width_mult=0.5)
    settings = [
        config(16, 3, 16, 16, True, "RE", 2, 1),
        config(16, 3, 72, 24, False, "RE", 2, 1),
        config(24, 5, 96, 40, True, "HS", 1, 2),
        config(40, 5, 240, 40, True, "HS", 1, 1),
    ]
    out["v3.settings"] = [
        [
            c.input_channels,
            c.kernel,
            c.expanded_channels,
            c.out_channels,
            c.use_se,
            c.use_hs,
            c.stride,
            c.dilation,
        ]
        for c in settings
    ]
    out.update(module_result("v3.model", mobilenetv3.MobileNetV3("BN", settings, 64), x_(1, 3, 64, 32)))
    return out


def _cnn() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 5, 3, stride=2, padding=1), nn.ReLU(), nn.Conv2d(5, 7, 3, stride=2))


@case
def backbones_vision_transformer() -> Result:
    out: Result = {}
    posemb = x_(1, 17, 6)
    out["resize_pos_embed"] = vit.resize_pos_embed(posemb, torch.zeros(1, 13, 6), 4, 3)
    out.update(module_result("patch_embed", vit.PatchEmbed((32, 16), 8, 3, 12), x_(2, 3, 32, 16)))
    out.update(
        module_result("patch_embed_overlap", vit.PatchEmbed_overlap((32, 16), 8, 6, 3, 12), x_(2, 3, 32, 16))
    )
    out.update(module_result("hybrid", vit.HybridEmbed(_cnn(), (32, 16), None, 3, 12), x_(2, 3, 32, 16)))
    tokens = x_(2, 5, 12)
    out.update(module_result("mlp", vit.Mlp(12, 20, 8), tokens))
    out.update(module_result("attention", vit.Attention(12, 3, True, 0.1), tokens))
    out.update(module_result("block", vit.Block(12, 4, 2.0, True, None, norm_layer=nn.LayerNorm), tokens))
    model = vit.VisionTransformer(
        (32, 16), 8, 6, 3, 24, 2, 4, 2.0, True, camera=3, sie_xishu=1.5
    )  # fmt: skip
    out.update(module_result("vit", model, x_(2, 3, 32, 16), torch.tensor([2, 0])))
    hybrid = vit.VisionTransformer((32, 16), embed_dim=12, depth=1, num_heads=3, hybrid_backbone=_cnn())
    out.update(module_result("vit_hybrid", hybrid, x_(2, 3, 32, 16)))
    return out


def run(name: str) -> Result:
    """The named case's result, tensors detached."""
    torch.manual_seed(0)
    return {k: v.detach() if isinstance(v, torch.Tensor) else v for k, v in CASES[name]().items()}
