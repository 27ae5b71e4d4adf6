"""Pooling layers and EmbeddingHead outputs."""

import pytest
import torch

from fastreid.config import ConfigError, get_cfg
from fastreid.layers import POOL_LAYERS, build_pooling
from fastreid.layers.pooling import GeneralizedMeanPooling
from fastreid.modeling import build_heads


@pytest.mark.parametrize("name", sorted(POOL_LAYERS))
def test_pooling_shapes(name):
    x = torch.rand(2, 4, 3, 2)
    expected = {"Identity": (2, 4, 3, 2), "Flatten": (2, 24, 1, 1)}.get(name, (2, 4, 1, 1))
    assert build_pooling(name)(x).shape == expected


def test_pooling_values():
    x = torch.rand(2, 4, 3, 2) + 0.1
    avg = x.mean((2, 3), keepdim=True)
    torch.testing.assert_close(GeneralizedMeanPooling(1.0)(x), avg)
    torch.testing.assert_close(build_pooling("FastGlobalAvgPool")(x), avg)
    torch.testing.assert_close(build_pooling("AdaptiveAvgMaxPool")(x), avg + x.amax((2, 3), keepdim=True))
    gem3 = x.pow(3).mean((2, 3), keepdim=True).pow(1 / 3)
    torch.testing.assert_close(build_pooling("GeneralizedMeanPoolingP")(x), gem3)
    assert list(dict(build_pooling("GeneralizedMeanPoolingP").named_parameters())) == ["p"]


def test_pooling_old_names_and_unknown():
    assert type(build_pooling("gempoolP")).__name__ == "GeneralizedMeanPoolingP"
    assert type(build_pooling("avgpool")).__name__ == "GlobalAvgPool"
    with pytest.raises(ValueError, match="POOL_LAYER 'median'"):
        build_pooling("median")


def head_cfg(**heads):
    cfg = get_cfg()
    cfg.MODEL.BACKBONE.FEAT_DIM = 16
    cfg.MODEL.HEADS.NUM_CLASSES = 5
    cfg.MODEL.HEADS.WITH_BNNECK = True
    for k, v in heads.items():
        setattr(cfg.MODEL.HEADS, k, v)
    return cfg


@pytest.mark.parametrize("neck_feat", ["before", "after"])
def test_embedding_head_outputs(neck_feat):
    head = build_heads(head_cfg(NECK_FEAT=neck_feat))
    fmap = torch.randn(4, 16, 3, 2)
    targets = torch.tensor([0, 1, 2, 3])
    out = head.train()(fmap, targets)
    pooled = fmap.mean((2, 3))
    assert out["cls_outputs"].shape == (4, 5)
    if neck_feat == "before":
        torch.testing.assert_close(out["features"], pooled)
    else:
        assert not torch.allclose(out["features"], pooled)
    torch.testing.assert_close(
        out["cls_outputs"], head.bottleneck(pooled[..., None, None])[..., 0, 0] @ head.weight.t()
    )
    feats = head.eval()(fmap)
    assert feats.shape == (4, 16)
    assert not head.bottleneck[0].bias.requires_grad


def test_embedding_head_with_embedding_dim_and_cosine_classifier():
    head = build_heads(head_cfg(EMBEDDING_DIM=8, CLS_LAYER="CosSoftmax", SCALE=10, MARGIN=0.2))
    assert {k: tuple(v.shape) for k, v in head.state_dict().items() if "running" not in k} == {
        "weight": (5, 8),
        "bottleneck.0.weight": (8, 16, 1, 1),
        "bottleneck.1.weight": (8,),
        "bottleneck.1.bias": (8,),
        "bottleneck.1.num_batches_tracked": (),
    }
    out = head.train()(torch.randn(4, 16, 2, 2), torch.tensor([0, 1, 2, 3]))
    assert out["pred_class_logits"].abs().max() <= 10 + 1e-5  # cosines times the scale


def test_embedding_head_errors():
    with pytest.raises(ConfigError, match="NECK_FEAT"):
        build_heads(head_cfg(NECK_FEAT="middle"))
    head = build_heads(head_cfg(NUM_CLASSES=0)).train()
    with pytest.raises(ValueError, match="NUM_CLASSES is 0") as info:  # raised by forward: not a config error
        head(torch.randn(2, 16, 2, 2), torch.tensor([0, 1]))
    assert not isinstance(info.value, ConfigError)
    with pytest.raises(ValueError, match="CLS_LAYER 'softmax'"):
        build_heads(head_cfg(CLS_LAYER="softmax"))
    with pytest.raises(ConfigError, match="MODEL.HEADS.NAME 'BNneckHead'"):
        build_heads(head_cfg(NAME="BNneckHead"))
