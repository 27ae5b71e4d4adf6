"""Backbones: depths, widths, norms, unsupported names and pretrained-weight errors."""

import pytest
import torch
from torch import nn

from fastreid.config import ConfigError, get_cfg
from fastreid.layers import FrozenBatchNorm, GhostBatchNorm, get_norm
from fastreid.modeling import build_backbone
from fastreid.modeling.backbones import UNSUPPORTED_BACKBONES, supported_backbones
from fastreid.modeling.backbones.pretrained import PretrainUnavailableError


def small_cfg(**backbone):
    cfg = get_cfg()
    cfg.MODEL.DEVICE = "cpu"
    cfg.MODEL.BACKBONE.PRETRAIN = False
    for key, value in backbone.items():
        setattr(cfg.MODEL.BACKBONE, key, value)
    return cfg


@pytest.mark.parametrize(("depth", "channels"), [("18x", 512), ("34x", 512), (50, 2048)])
def test_resnet_depths(depth, channels):
    model = build_backbone(small_cfg(DEPTH=depth, LAST_STRIDE=2))
    assert model.out_channels == channels
    out = model(torch.randn(2, 3, 64, 32))
    assert out.shape == (2, channels, 2, 1)


def test_resnet_basic_block_ibn_se_keys():
    model = build_backbone(small_cfg(DEPTH="18x", WITH_IBN=True, WITH_SE=True))
    keys = model.state_dict().keys()
    assert "layer1.0.bn1.IN.weight" in keys and "layer3.1.bn1.BN.running_var" in keys
    assert "layer4.0.bn1.weight" in keys
    assert "layer2.0.se.fc.0.weight" in keys and "layer2.0.se.fc.2.weight" in keys
    model(torch.randn(2, 3, 64, 32)).sum().backward()


@pytest.mark.slow
def test_resnet101_non_local_counts():
    model = build_backbone(small_cfg(DEPTH="101x", WITH_NL=True))
    assert len(model.NL_2) == 2 and len(model.NL_3) == 9 and len(model.NL_1) == 0


def test_non_local_starts_as_identity():
    from fastreid.layers import Non_local

    block = Non_local(16, "BN").eval()
    x = torch.randn(2, 16, 4, 3)
    assert torch.equal(block(x), x)


@pytest.mark.parametrize("width", ["x1_0", "x0_75", "x0_5", "x0_25"])
def test_osnet_widths(width):
    model = build_backbone(small_cfg(NAME="build_osnet_backbone", DEPTH=width))
    if width == "x0_25":
        out = model(torch.randn(2, 3, 64, 32))
        out.mean().backward()
    else:
        with torch.no_grad():
            out = model.eval()(torch.randn(1, 3, 64, 32))
    assert out.shape[1:] == (model.out_channels, 4, 2)


def test_osnet_ibn_keys():
    model = build_backbone(small_cfg(NAME="build_osnet_backbone", DEPTH="x0_25", WITH_IBN=True))
    keys = model.state_dict().keys()
    assert "conv1.bn.weight" in keys and "conv2.0.IN.weight" in keys and "conv3.0.IN.weight" not in keys
    assert "conv2.2.0.conv.weight" in keys and "conv2.0.gate.fc1.bias" in keys


@pytest.mark.parametrize("norm", ["BN", "syncBN", "GhostBN", "FrozenBN", "GN"])
def test_norms_train_forward_backward(norm):
    model = build_backbone(small_cfg(DEPTH="18x", NORM=norm, NORM_SPLIT=2))
    model(torch.randn(4, 3, 32, 16)).mean().backward()
    assert model.conv1.weight.grad is not None


def test_ghost_bn_uses_sub_batch_statistics():
    x = torch.randn(8, 3, 2, 2)
    ghost = GhostBatchNorm(3, num_splits=2).train()
    out = ghost(x)
    # sample i belongs to sub-batch i % 2
    for k in range(2):
        sub = x[k::2]
        ref = (sub - sub.mean((0, 2, 3), keepdim=True)) / torch.sqrt(
            sub.var((0, 2, 3), unbiased=False, keepdim=True) + 1e-5
        )
        torch.testing.assert_close(out[k::2], ref, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="not divisible"):
        ghost(torch.randn(3, 3, 2, 2))


def test_frozen_bn_keeps_statistics_and_parameters():
    bn = FrozenBatchNorm(3).train()
    x = torch.randn(4, 3, 2, 2) * 5 + 2
    torch.testing.assert_close(bn(x), x)  # the identity at first (running_var = 1 - eps)
    assert torch.equal(bn.running_mean, torch.zeros(3)) and list(bn.parameters()) == []
    # upstream's keys: BatchNorm's without num_batches_tracked, which a BatchNorm state dict may carry
    assert set(bn.state_dict()) == set(nn.BatchNorm2d(3).state_dict()) - {"num_batches_tracked"}
    source = nn.BatchNorm2d(3)
    source.running_mean.fill_(1.0)
    bn.load_state_dict(source.state_dict())
    torch.testing.assert_close(bn.running_mean, torch.ones(3))


def test_convert_frozen_batchnorm_keeps_eval_outputs():
    model = nn.Sequential(nn.Conv2d(3, 4, 1), nn.BatchNorm2d(4), nn.ReLU(), nn.Sequential(nn.BatchNorm2d(4)))
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)
            m.weight.data.uniform_(0.5, 2)
    x = torch.randn(2, 3, 5, 5)
    expected = model.eval()(x)
    frozen = FrozenBatchNorm.convert_frozen_batchnorm(model)
    assert isinstance(frozen[1], FrozenBatchNorm) and isinstance(frozen[3][0], FrozenBatchNorm)
    torch.testing.assert_close(frozen.train()(x), expected)


def test_unknown_norm():
    with pytest.raises(ValueError, match="expected one of BN, syncBN"):
        get_norm("LayerNorm", 4)


# The names upstream FastReID's backbones/__init__.py registers (commit c9bc3ce).
UPSTREAM_BACKBONES = (
    "build_effnet_backbone",
    "build_mobilenetv2_backbone",
    "build_mobilenetv3_backbone",
    "build_osnet_backbone",
    "build_regnet_backbone",
    "build_repvgg_backbone",
    "build_resnest_backbone",
    "build_resnet_backbone",
    "build_resnext_backbone",
    "build_shufflenetv2_backbone",
    "build_vit_backbone",
)


def test_every_upstream_backbone_is_registered():
    assert set(UPSTREAM_BACKBONES) <= set(supported_backbones())
    assert not set(UNSUPPORTED_BACKBONES) & set(supported_backbones())


def test_unknown_backbone_and_depth():
    with pytest.raises(ConfigError, match="unknown"):
        build_backbone(small_cfg(NAME="build_foo_backbone"))
    with pytest.raises(ConfigError, match="DEPTH '152x'.*18x, 34x, 50x, 101x"):
        build_backbone(small_cfg(DEPTH="152x"))


def test_pretrain_without_network_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))

    def no_network(*args, **kwargs):
        raise OSError("network is unreachable")

    monkeypatch.setattr(torch.hub, "download_url_to_file", no_network)
    with pytest.raises(PretrainUnavailableError, match="PRETRAIN_PATH.*PRETRAIN False") as info:
        build_backbone(small_cfg(DEPTH="18x", PRETRAIN=True))
    assert str(tmp_path) in str(info.value) and "network is unreachable" in str(info.value)


@pytest.mark.slow
@pytest.mark.parametrize(
    "backbone",
    [
        {"DEPTH": "50x", "WITH_SE": True},
        {"NAME": "build_mobilenetv2_backbone", "DEPTH": "1.0x"},
        {"NAME": "build_resnext_backbone", "DEPTH": "101x"},
    ],
)
def test_pretrain_without_published_weights_asks_for_a_path(backbone):
    with pytest.raises(PretrainUnavailableError, match="no published ImageNet weights.*PRETRAIN_PATH"):
        build_backbone(small_cfg(PRETRAIN=True, **backbone))


def test_pretrain_path_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        build_backbone(small_cfg(DEPTH="18x", PRETRAIN=True, PRETRAIN_PATH=str(tmp_path / "nope.pth")))


def test_pretrain_path_not_a_state_dict(tmp_path):
    path = tmp_path / "junk.pth"
    torch.save({"epoch": 3}, path)
    with pytest.raises(ConfigError, match="does not hold a state dict"):
        build_backbone(small_cfg(DEPTH="18x", PRETRAIN=True, PRETRAIN_PATH=str(path)))
