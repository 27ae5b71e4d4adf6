"""Upstream's ways of building and using the backbones and meta-architectures that the reference
numbers do not cover: RegNet/EffNet from pycls's global config, ``init_pretrained_weights``
(offline, from files already in TORCH_HOME), RepVGG's ``deploy`` on any model, ``MoCo(cfg)`` /
``Distiller(cfg)`` and their explicit forms, and the errors of the new entry points."""

from __future__ import annotations

import inspect
import sys

import pytest
import torch
from test_baseline import tiny_cfg
from torch import nn

from fastreid.config import get_cfg
from fastreid.modeling import build_backbone, build_model
from fastreid.modeling.backbones import osnet, resnet, resnext
from fastreid.modeling.backbones.mobilenetv3 import MobileNetV3, mobilenet_v3_config
from fastreid.modeling.backbones.pretrained import PretrainUnavailableError
from fastreid.modeling.backbones.regnet import config as regnet_config
from fastreid.modeling.backbones.regnet import effnet, regnet
from fastreid.modeling.backbones.repvgg import RepVGG, deploy
from fastreid.modeling.backbones.shufflenet import ShuffleV2Block
from fastreid.modeling.backbones.vision_transformer import PatchEmbed, VisionTransformer
from fastreid.modeling.losses import log_accuracy
from fastreid.modeling.meta_arch import MGN, Baseline, Distiller, MoCo
from fastreid.modeling.meta_arch.moco import Memory
from fastreid.utils.events import EventStorage

REGNETY_200MF = """
MODEL:
  TYPE: regnet
  NUM_CLASSES: 1000
REGNET:
  SE_ON: True
  DEPTH: 13
  W0: 24
  WA: 36.44
  WM: 2.49
  GROUP_W: 8
OPTIM:
  WEIGHT_DECAY: 5e-5
"""
EN_B0 = """
EN:
  STEM_W: 32
  STRIDES: [1, 2, 2, 2, 1, 2, 1]
  DEPTHS: [1, 2, 2, 3, 3, 4, 1]
  WIDTHS: [16, 24, 40, 80, 112, 192, 320]
  EXP_RATIOS: [1, 6, 6, 6, 6, 6, 6]
  KERNELS: [3, 3, 5, 3, 5, 5, 3]
  HEAD_W: 1280
"""


@pytest.fixture
def pycls_cfg():
    """pycls's global config, restored after the test."""
    saved = regnet_config.cfg.clone()
    yield regnet_config.cfg
    regnet_config.cfg.merge_from_other_cfg(saved)


def _backbone_cfg(**backbone):
    cfg = get_cfg()
    cfg.MODEL.BACKBONE.PRETRAIN = False
    for key, value in backbone.items():
        setattr(cfg.MODEL.BACKBONE, key, value)
    return cfg


def _shapes(model: nn.Module) -> dict:
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


def test_regnet_and_effnet_from_pycls_global_config(pycls_cfg, tmp_path):
    """Upstream's way: merge a pycls YAML into the global config, then ``RegNet(last_stride,
    bn_norm)``; the same network as the builder's."""
    (tmp_path / "regnety.yaml").write_text(REGNETY_200MF)
    (tmp_path / "en.yaml").write_text(EN_B0)
    pycls_cfg.merge_from_file(str(tmp_path / "regnety.yaml"))
    ours = build_backbone(_backbone_cfg(NAME="build_regnet_backbone", DEPTH="200y", LAST_STRIDE=1))
    assert _shapes(regnet.RegNet(1, "BN")) == _shapes(ours)
    pycls_cfg.merge_from_file(str(tmp_path / "en.yaml"))
    ours = build_backbone(_backbone_cfg(NAME="build_effnet_backbone", DEPTH="b0", LAST_STRIDE=1))
    assert _shapes(effnet.EffNet(1, "BN")) == _shapes(ours)
    # the builders never read nor change the global config
    assert pycls_cfg.REGNET.DEPTH == 13 and pycls_cfg.EN.HEAD_W == 1280


def test_pycls_config_functions(pycls_cfg, tmp_path, monkeypatch):
    pycls_cfg.OUT_DIR = str(tmp_path)
    pycls_cfg.REGNET.DEPTH = 21
    regnet_config.dump_cfg()
    pycls_cfg.REGNET.DEPTH = 10
    regnet_config.load_cfg(str(tmp_path))
    assert pycls_cfg.REGNET.DEPTH == 21
    (tmp_path / "en.yaml").write_text(EN_B0)
    monkeypatch.setattr(sys, "argv", ["prog", "--cfg", str(tmp_path / "en.yaml"), "EN.HEAD_W", "640"])
    regnet_config.load_cfg_fom_args()
    assert pycls_cfg.EN.HEAD_W == 640 and pycls_cfg.EN.DEPTHS == [1, 2, 2, 3, 3, 4, 1]
    regnet_config.assert_and_infer_cfg()
    pycls_cfg.TRAIN.SPLIT = "holdout"
    with pytest.raises(AssertionError, match="Data split 'holdout' not supported"):
        regnet_config.assert_and_infer_cfg()


def test_regnet_zero_init_final_gamma_and_drop_connect(pycls_cfg):
    pycls_cfg.BN.ZERO_INIT_FINAL_GAMMA = True
    block = regnet.ResBottleneckBlock(8, 8, 1, "BN", 1.0, 4, None)
    block.apply(regnet.init_weights)
    assert (
        float(block.f.c_bn.weight.detach().abs().sum()) == 0
        and float(block.f.a_bn.weight.detach().sum()) == 8
    )
    torch.manual_seed(0)
    x = torch.ones(10_000, 2, 1, 1, dtype=torch.float64)
    y = regnet.drop_connect(x, 0.2)
    assert y is x and set(y.unique().tolist()) <= {0.0, 1.25}
    assert float((y[:, 0] == 0).double().mean()) == pytest.approx(0.2, abs=0.02)
    with pytest.raises(ValueError, match="Vanilla block does not support"):
        regnet.VanillaBlock(8, 8, 1, "BN", bm=1.0)
    with pytest.raises(ValueError, match="Stem type 'big_stem' not supported"):
        regnet.get_stem_fun("big_stem")


def _offline(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))

    def no_network(*args, **kwargs):
        raise OSError("network is unreachable")

    monkeypatch.setattr(torch.hub, "download_url_to_file", no_network)
    folder = tmp_path / "checkpoints"  # where upstream keeps these files
    folder.mkdir()
    return folder


def test_init_pretrained_weights_reads_published_files_already_downloaded(monkeypatch, tmp_path):
    folder = _offline(monkeypatch, tmp_path)
    w = torch.randn(4, 3)
    torch.save(
        {"state_dict": {"module.conv1.weight": w, "module.fc.weight": w}},
        folder / "resnet50_ibn_a-d9d0bb7b.pth",
    )
    torch.save({"model_state": {"stem.conv.weight": w}}, folder / "RegNetY-800MF_dds_8gpu.pyth")
    torch.save({"model_state": {"stem.conv.weight": w}}, folder / "EN-B0_dds_8gpu.pyth")
    torch.save({"conv1.weight": w}, folder / "resnext101_ibn_a-6ace051d.pth")
    state = resnet.init_pretrained_weights("ibn_50x")
    assert list(state) == ["conv1.weight", "fc.weight"] and torch.equal(state["conv1.weight"], w)
    assert torch.equal(regnet.init_pretrained_weights("800y")["stem.conv.weight"], w)
    assert torch.equal(effnet.init_pretrained_weights("b0")["stem.conv.weight"], w)
    assert torch.equal(resnext.init_pretrained_weights("ibn_101x")["conv1.weight"], w)
    with pytest.raises(PretrainUnavailableError, match="network is unreachable"):
        regnet.init_pretrained_weights("200x")
    with pytest.raises(PretrainUnavailableError, match="published variants: ibn_101x"):
        resnext.init_pretrained_weights("ibn_152x")


def test_osnet_init_pretrained_weights_keeps_what_does_not_match(monkeypatch, tmp_path):
    folder = _offline(monkeypatch, tmp_path)
    model = build_backbone(_backbone_cfg(NAME="build_osnet_backbone", DEPTH="x0_25"))
    own = model.state_dict()
    stem = torch.randn_like(own["conv1.conv.weight"])
    published = {  # saved from DataParallel, as deep-person-reid's files are
        "module.conv1.conv.weight": stem,
        "module.conv5.conv.weight": torch.zeros(3, 3),  # wrong shape: kept from the model
        "module.classifier.weight": torch.zeros(1000, 128),  # not in the model
    }
    torch.save(published, folder / "osnet_x0_25_imagenet.pth")
    state = osnet.init_pretrained_weights(model, "osnet_x0_25")
    assert set(state) == set(own)
    assert torch.equal(state["conv1.conv.weight"], stem)
    assert torch.equal(state["conv5.conv.weight"], own["conv5.conv.weight"])
    model.load_state_dict(state)


def _randomise_norms(model: nn.Module) -> nn.Module:
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g, dtype=torch.float64) * 0.1)
            m.running_var.copy_(torch.rand(m.running_var.shape, generator=g, dtype=torch.float64) + 0.5)
            m.weight.data.copy_(1 + 0.2 * torch.randn(m.weight.shape, generator=g, dtype=torch.float64))
    return model


def test_deploy_fuses_repvgg_blocks_anywhere_in_a_model_in_float64():
    torch.manual_seed(0)
    backbone = RepVGG(1, "BN", [1, 2, 2, 1], [0.25, 0.25, 0.25, 0.5], {2: 2, 4: 2}).double()
    model = _randomise_norms(nn.Sequential(backbone, nn.AdaptiveAvgPool2d(1)).eval())
    x = torch.randn(2, 3, 64, 32, dtype=torch.float64)
    with torch.no_grad():
        before = model(x)
        assert deploy(model, True) is model
        after = model(x)
    torch.testing.assert_close(after, before, rtol=1e-12, atol=1e-12 * float(before.abs().max()))
    keys = model.state_dict()
    assert "0.stage0.fused_weight" in keys and not any("rbr_" in k for k in keys)
    assert backbone.deploying
    with pytest.raises(ValueError, match="cannot go back"):
        deploy(model, False)
    assert not hasattr(nn.Sequential, "deploy")  # torch's classes are left alone


def test_building_block_options():
    block = ShuffleV2Block("BN", 24, 48, 24, ksize=5, stride=2)
    assert block.branch_main[3].kernel_size == (5, 5)
    assert block(torch.randn(1, 24, 8, 8)).shape == (1, 48, 4, 4)
    with pytest.raises(ValueError, match="stride must be 1 or 2"):
        ShuffleV2Block("BN", 24, 48, 24, stride=3)
    settings, last = mobilenet_v3_config("Small", 0.5, reduced_tail=True, dilated=True)
    model = MobileNetV3("BN", settings, last).eval()
    assert model(torch.randn(1, 3, 64, 32)).shape == (1, last, 4, 2)  # the dilated tail keeps stride 16
    se = resnet.BasicBlock(64, 64, "BN", with_se=True, reduction=4).se
    assert se.fc[0].out_features == 16
    with pytest.raises(ValueError, match="built for 32x16"):
        PatchEmbed((32, 16), 8, 3, 12)(torch.randn(1, 3, 16, 16))
    assert VisionTransformer((32, 16), 8, 8, 3, 12, 1, 3).no_weight_decay() == {"pos_embed", "cls_token"}


def test_log_accuracy_topk_and_storage():
    logits = torch.tensor([[0.1, 0.5, 0.4], [0.8, 0.1, 0.1], [0.2, 0.3, 0.5], [0.3, 0.35, 0.36]])
    targets = torch.tensor([2, 0, 1, 0])
    with EventStorage(0) as storage:
        top1, top2 = log_accuracy(logits, targets, topk=(1, 2))
        assert float(storage.history("cls_accuracy").latest()) == 0.25
    assert float(top1) == 0.25 and float(top2) == 0.75
    with pytest.raises(RuntimeError, match="EventStorage"):
        log_accuracy(logits, targets)


def test_moco_and_memory_as_upstream_builds_them():
    cfg = tiny_cfg(**{"MODEL.META_ARCHITECTURE": "MoCo", "MODEL.QUEUE_SIZE": 8})
    torch.manual_seed(0)
    model = MoCo(cfg)
    assert model.memory.queue.shape == (512, 8) and model.memory.K == 8
    explicit = MoCo(**{**MoCo.from_config(cfg), "queue_size": 16})
    assert explicit.memory.queue.shape == (512, 16)
    assert MoCo(cfg, queue_size=4).memory.K == 4  # keywords override the cfg's values
    with pytest.raises(TypeError, match="memory_dim, queue_size"):
        MoCo(**Baseline.from_config(cfg))
    defaults = inspect.signature(Memory).parameters
    assert (defaults["dim"].default, defaults["K"].default) == (512, 65536)


@pytest.mark.slow
def test_mgn_explicit_form_takes_upstreams_head_keywords():
    cfg = tiny_cfg(
        **{
            "MODEL.META_ARCHITECTURE": "MGN",
            "MODEL.BACKBONE.DEPTH": "50x",
            "MODEL.BACKBONE.FEAT_DIM": 2048,
        }
    )
    kwargs = MGN.from_config(cfg)
    assert {
        "b1_head",
        "b2_head",
        "b21_head",
        "b22_head",
        "b3_head",
        "b31_head",
        "b32_head",
        "b33_head",
    } <= set(kwargs)
    kwargs.pop("loss_kwargs")
    model = MGN(**kwargs)  # loss_kwargs is optional, as upstream's: cross-entropy
    assert model.loss_kwargs["loss_names"] == ("CrossEntropyLoss",)
    assert model.b33_head is kwargs["b33_head"]


@pytest.mark.slow
def test_distiller_as_upstream_builds_it_with_ema_weights(tmp_path):
    """``Distiller(cfg)``; with ``KD.EMA.ENABLED`` and ``MODEL.WEIGHTS`` the EMA teacher starts
    from those weights (upstream loads them into its self-distillation model)."""
    torch.manual_seed(5)
    source = build_model(tiny_cfg(), log_summary=False)
    weights = tmp_path / "model.pth"
    torch.save({"model": source.state_dict()}, weights)
    cfg = tiny_cfg(
        **{
            "MODEL.META_ARCHITECTURE": "Distiller",
            "KD.EMA.ENABLED": True,
            "KD.EMA.MOMENTUM": 0.9,
            "MODEL.WEIGHTS": str(weights),
        }
    )
    torch.manual_seed(6)
    model = Distiller(cfg)
    (ema,) = model.model_ts
    assert torch.equal(ema.backbone.conv1.weight, source.backbone.conv1.weight)
    assert not torch.equal(model.backbone.conv1.weight, source.backbone.conv1.weight)
    explicit = Distiller(teachers=[source], **Baseline.from_config(tiny_cfg()))
    assert explicit.model_ts == [source] and explicit.ema_momentum is None
