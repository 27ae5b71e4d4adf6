"""DSRHead and PartialBaseline: upstream's outputs, state-dict keys and losses; the feature map
size check; flip averaging of the foreground feature only."""

from __future__ import annotations

import pytest
import torch

from fastreid.config import get_cfg
from fastreid.modeling import build_model
from fastreid.projects.partial import DSRHead, add_partialreid_config
from fastreid.projects.partial.trainer import FlipAveragedForeground


def _cfg(**over):
    cfg = add_partialreid_config(get_cfg())
    cfg.merge_from_list(
        [
            "MODEL.META_ARCHITECTURE", "PartialBaseline",
            "MODEL.HEADS.NAME", "DSRHead",
            "MODEL.BACKBONE.DEPTH", "18x",
            "MODEL.BACKBONE.FEAT_DIM", 512,
            "MODEL.BACKBONE.PRETRAIN", False,
            "MODEL.BACKBONE.LAST_STRIDE", 1,
            "MODEL.HEADS.NUM_CLASSES", 4,
            "MODEL.HEADS.WITH_BNNECK", True,
            "MODEL.HEADS.POOL_LAYER", "FastGlobalAvgPool",
            "MODEL.LOSSES.NAME", ("CrossEntropyLoss", "TripletLoss"),
            "MODEL.DEVICE", "cpu",
        ]
    )  # fmt: skip
    for k, v in over.items():
        cfg.merge_from_list([k, v])
    return cfg


def test_the_head_gives_upstreams_outputs_and_keys():
    cfg = _cfg()
    head = DSRHead(cfg)
    keys = set(head.state_dict())
    assert {"occ_unit.mask_layer.weight", "occ_unit.mask_layer.bias", "weight_occ", "weight"} <= keys
    assert {"bnneck_occ.0.weight", "bnneck_occ.0.running_mean", "bottleneck.0.weight"} <= keys
    features = torch.randn(3, 512, 24, 8)  # upstream's 384 x 128 input: 110 positions
    head.eval()
    fore, spatial, scores = head(features)
    assert fore.shape == (3, 512) and spatial.shape == (3, 512, 110) and scores.shape == (3, 110)
    assert torch.allclose(scores.sum(1), torch.ones(3))
    head.train()
    out = head(features, torch.tensor([0, 1, 2]))
    assert set(out) == {
        "cls_outputs",
        "fore_cls_outputs",
        "pred_class_logits",
        "features",
        "foreground_features",
    }
    assert out["fore_cls_outputs"].shape == (3, 4) and out["foreground_features"].shape == (3, 512)


def test_the_foreground_feature_is_the_score_weighted_mean_of_the_finest_positions():
    head = DSRHead(_cfg()).eval()
    features = torch.randn(2, 512, 16, 8)
    fore, mask_weight, _ = head.occ_unit(features)
    fine = torch.nn.functional.max_pool2d(features, 2, 2).flatten(2)  # 2 x 512 x 32
    w = mask_weight[:, :32] / mask_weight[:, :32].sum(1, keepdim=True)
    assert torch.allclose(fore[..., 0, 0], torch.einsum("ncm,nm->nc", fine, w), atol=1e-5)


def test_a_feature_map_too_small_for_the_pools_is_one_line():
    head = DSRHead(_cfg()).eval()
    with pytest.raises(ValueError, match=r"backbone gives 8 x 4.*INPUT.SIZE_TRAIN"):
        head(torch.randn(1, 512, 8, 4))


@pytest.mark.slow  # a ResNet-18 forward and backward on 128 x 128 images
def test_partial_baseline_adds_the_foreground_losses():
    model = build_model(_cfg(), log_summary=False)
    batch = {"images": torch.rand(4, 3, 128, 128) * 255, "targets": torch.tensor([0, 0, 1, 1])}
    losses = model(batch)
    assert set(losses) == {"loss_cls", "loss_triplet", "loss_fore_cls", "loss_fore_triplet"}
    sum(losses.values()).backward()
    assert model.heads.occ_unit.mask_layer.weight.grad is not None
    assert model.heads.weight_occ.grad is not None


@pytest.mark.slow  # three ResNet-18 forwards on 128 x 128 images
def test_flip_averages_the_foreground_feature_only():
    model = build_model(_cfg(), log_summary=False).eval()
    batch = {"images": torch.rand(2, 3, 128, 128) * 255}
    with torch.no_grad():
        fore, spatial, scores = model(batch)
        mirrored = model({"images": batch["images"].flip(dims=[3])})
        f2, s2, w2 = FlipAveragedForeground(model)(batch)
    assert torch.allclose(f2, (fore + mirrored[0]) / 2)
    assert torch.equal(s2, spatial) and torch.equal(w2, scores)
