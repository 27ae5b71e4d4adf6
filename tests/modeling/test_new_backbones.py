"""RepVGG re-parameterisation, ViT camera embeddings and pretrained-weight adaptation,
MobileNetV3 variants, and the errors of the backbone builders."""

from __future__ import annotations

import os

import pytest
import torch

from fastreid.config import ConfigError, get_cfg
from fastreid.modeling import build_model
from fastreid.modeling.backbones import build_backbone
from fastreid.modeling.backbones.repvgg import RepVGG, RepVGGBlock
from fastreid.modeling.backbones.vision_transformer import VisionTransformer, adapt_pretrained_vit_state


def _randomise_norm_stats(model):
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
            m.weight.data.copy_(1 + 0.2 * torch.randn(m.weight.shape, generator=g))
            m.bias.data.copy_(0.1 * torch.randn(m.bias.shape, generator=g))


@pytest.mark.parametrize("groups", [1, 2])
def test_repvgg_deploy_gives_train_form_features(groups):
    torch.manual_seed(0)
    model = RepVGG(1, "BN", [1, 2, 2, 1], [0.25, 0.25, 0.25, 0.5], {2: groups, 4: groups}).eval()
    _randomise_norm_stats(model)
    x = torch.randn(2, 3, 64, 32)
    with torch.no_grad():
        before = model(x)
        model.deploy(True)
        after = model(x)
    torch.testing.assert_close(after, before, rtol=1e-4, atol=1e-4)
    keys = set(model.state_dict())
    assert "stage1.0.fused_weight" in keys and not any("rbr_" in k for k in keys)
    block = model.stage2[1]
    assert isinstance(block, RepVGGBlock) and block.fused_weight.shape[1] == block.in_channels // block.groups
    with pytest.raises(ValueError, match="cannot go back"):
        model.deploy(False)


def test_repvgg_a0_backbone_deploys_from_config():
    cfg = get_cfg()
    cfg.merge_from_list(["MODEL.BACKBONE.NAME", "build_repvgg_backbone", "MODEL.BACKBONE.DEPTH", "A0"])
    backbone = build_backbone(cfg).eval()
    _randomise_norm_stats(backbone)
    assert backbone.out_channels == 1280
    x = torch.randn(1, 3, 64, 32)
    with torch.no_grad():
        before = backbone(x)
        after = backbone.deploy(True)(x)
    torch.testing.assert_close(after, before, rtol=1e-4, atol=1e-4)
    cfg.MODEL.BACKBONE.DEPTH = "C9"
    with pytest.raises(ConfigError, match="not a RepVGG variant"):
        build_backbone(cfg)


REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def vit_cfg(**overrides):
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(REPO, "configs/Market1501/bagtricks_vit.yml"))
    cfg.merge_from_list(
        [
            "MODEL.DEVICE",
            "cpu",
            "MODEL.BACKBONE.PRETRAIN",
            False,
            "MODEL.HEADS.NUM_CLASSES",
            4,
            "INPUT.SIZE_TRAIN",
            [64, 32],
            "INPUT.SIZE_TEST",
            [64, 32],
            "MODEL.BACKBONE.VIT_EMBED_DIM",
            32,
            "MODEL.BACKBONE.VIT_NUM_LAYERS",
            2,
            "MODEL.BACKBONE.VIT_NUM_HEADS",
            4,
            "MODEL.BACKBONE.FEAT_DIM",
            32,
        ]
    )
    cfg.merge_from_list([x for kv in overrides.items() for x in kv])
    return cfg


def test_vit_camera_embedding_changes_features_by_camera():
    torch.manual_seed(0)
    model = build_model(vit_cfg(**{"MODEL.BACKBONE.SIE_CAMERAS": 3}), log_summary=False).eval()
    assert model.backbone.sie_embed.shape == (3, 1, 32)
    images = torch.randint(0, 256, (2, 3, 64, 32), dtype=torch.uint8)
    with torch.no_grad():
        a = model({"images": images, "camids": torch.tensor([0, 0])})
        b = model({"images": images, "camids": torch.tensor([0, 2])})
        torch.testing.assert_close(a[0], b[0])
        assert not torch.allclose(a[1], b[1])
        # by hand: the SIE term is SIE_COE * sie_embed[cam] added to every token
        backbone = model.backbone
        x = model.preprocess_image(images)
        with_cam = backbone(x, torch.tensor([2, 2]))
        backbone.sie_embed.data[2] = backbone.sie_embed.data[0]
        torch.testing.assert_close(backbone(x, torch.tensor([2, 2])), backbone(x, torch.tensor([0, 0])))
        assert with_cam.shape == (2, 32, 1, 1)
        with pytest.raises(ValueError, match="camids"):
            model({"images": images})
        with pytest.raises(ValueError, match=r"camids must lie in \[0, 3\)"):
            model({"images": images, "camids": torch.tensor([0, 5])})
        with pytest.raises(ValueError, match="built for 64x32"):
            model({"images": torch.zeros(1, 3, 32, 32), "camids": torch.tensor([0])})


def test_vit_trains_one_step_and_adapts_imagenet_weights(tmp_path):
    torch.manual_seed(0)
    model = build_model(vit_cfg(**{"MODEL.BACKBONE.DROP_PATH_RATIO": 0.1}), log_summary=False).train()
    batch = {
        "images": torch.randint(0, 256, (4, 3, 64, 32), dtype=torch.uint8),
        "targets": torch.tensor([0, 0, 1, 1]),
    }
    losses = model(batch)
    assert set(losses) == {"loss_cls", "loss_triplet"}
    sum(losses.values()).backward()
    assert model.backbone.pos_embed.grad is not None

    # an ImageNet checkpoint: 14x14 grid of positions, a linear patch projection and a classifier
    source = VisionTransformer(img_size=(224, 224), embed_dim=32, depth=2, num_heads=4)
    state = dict(source.state_dict())
    state["patch_embed.proj.weight"] = state["patch_embed.proj.weight"].reshape(32, -1)
    state["head.weight"] = torch.zeros(1000, 32)
    target = model.backbone
    adapted = adapt_pretrained_vit_state(state, target)
    assert "head.weight" not in adapted
    assert adapted["pos_embed"].shape == target.pos_embed.shape == (1, 9, 32)
    torch.testing.assert_close(adapted["pos_embed"][:, 0], state["pos_embed"][:, 0])
    path = tmp_path / "vit.pth"
    torch.save({"model": state}, path)
    cfg = vit_cfg(**{"MODEL.BACKBONE.PRETRAIN": True, "MODEL.BACKBONE.PRETRAIN_PATH": str(path)})
    loaded = build_model(cfg, log_summary=False)
    torch.testing.assert_close(loaded.backbone.blocks[1].mlp.fc2.weight, state["blocks.1.mlp.fc2.weight"])
    from fastreid.modeling.backbones.pretrained import PretrainUnavailableError

    with pytest.raises(PretrainUnavailableError, match="jx_vit_base_p16_224"):
        build_model(vit_cfg(**{"MODEL.BACKBONE.PRETRAIN": True}), log_summary=False)


@pytest.mark.parametrize("depth,channels", [("Large", 1280), ("small", 1024)])
def test_mobilenetv3_variants(depth, channels):
    cfg = get_cfg()
    cfg.merge_from_list(["MODEL.BACKBONE.NAME", "build_mobilenetv3_backbone", "MODEL.BACKBONE.DEPTH", depth])
    backbone = build_backbone(cfg).eval()
    with torch.no_grad():
        assert backbone(torch.zeros(1, 3, 64, 32)).shape == (1, channels, 2, 1)
    cfg.MODEL.BACKBONE.DEPTH = "Medium"
    with pytest.raises(ConfigError, match="Large or Small"):
        build_backbone(cfg)


def test_unknown_backbone_lists_supported():
    cfg = get_cfg()
    cfg.MODEL.BACKBONE.NAME = "build_swin_backbone"
    with pytest.raises(ConfigError, match="build_repvgg_backbone.*build_vit_backbone|unknown"):
        build_backbone(cfg)
