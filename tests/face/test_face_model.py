"""The face model: IResNet (upstream's keys and shapes; the IR-SE variant), FaceHead / FaceBaseline
with and without Partial FC, and Partial FC on one process: with sample rate 1 its loss and
gradients are the softmax cross-entropy of the margin logits (autograd's), with a lower rate the
batch's classes are always sampled and only the sampled centres move."""

from __future__ import annotations

import functools

import pytest
import torch
import torch.nn.functional as F

from fastreid.config import get_cfg
from fastreid.layers.any_softmax import build_cls_layer
from fastreid.modeling import build_model
from fastreid.projects.face import PartialFC, add_face_config
from fastreid.projects.face.modeling import class_shard


def _cfg(pfc: bool):
    cfg = add_face_config(get_cfg())
    cfg.merge_from_list(
        [
            "MODEL.META_ARCHITECTURE", "FaceBaseline",
            "MODEL.BACKBONE.NAME", "build_iresnet_backbone",
            "MODEL.BACKBONE.DEPTH", "18x",
            "MODEL.BACKBONE.FEAT_DIM", "512",
            "MODEL.HEADS.NAME", "FaceHead",
            "MODEL.HEADS.POOL_LAYER", "Flatten",
            "MODEL.HEADS.EMBEDDING_DIM", "16",
            "MODEL.HEADS.WITH_BNNECK", "True",
            "MODEL.HEADS.CLS_LAYER", "CosSoftmax",
            "MODEL.HEADS.SCALE", "16",
            "MODEL.HEADS.MARGIN", "0.2",
            "MODEL.HEADS.NUM_CLASSES", "5",
            "MODEL.HEADS.PFC.ENABLED", str(pfc),
            "MODEL.DEVICE", "cpu",
        ]
    )  # fmt: skip
    return cfg


@functools.cache
def _model(pfc: bool):
    """One IResNet-18 model per Partial FC setting for the whole module (building one is the slow part)."""
    return build_model(_cfg(pfc))


def test_iresnet_keeps_upstreams_keys_and_shapes():
    model = _model(False)
    keys = model.state_dict().keys()
    for key in ("backbone.conv1.weight", "backbone.prelu.weight", "backbone.layer1.0.bn1.weight",
                "backbone.layer1.0.conv2.weight", "backbone.layer1.0.bn3.running_mean",
                "backbone.layer1.0.downsample.0.weight", "backbone.bn2.weight", "heads.weight"):  # fmt: skip
        assert key in keys, key
    model.eval()
    out = model(torch.randint(0, 255, (2, 3, 16, 16), dtype=torch.uint8).float())
    assert out.shape == (2, 16)
    assert model.backbone(torch.zeros(1, 3, 32, 32)).shape == (1, 512, 2, 2)  # 112x112: 7x7


def test_without_pfc_face_baseline_trains_as_baseline():
    model = _model(False).train()
    losses = model({"images": torch.rand(4, 3, 16, 16) * 255, "targets": torch.tensor([0, 1, 2, 4])})
    assert set(losses) == {"loss_cls"} and torch.isfinite(losses["loss_cls"])


def test_with_pfc_the_model_returns_embeddings_and_targets():
    model = _model(True).train()
    assert "heads.weight" not in model.state_dict()
    targets = torch.tensor([0, 1, 2, 4])
    emb, out_targets = model({"images": torch.rand(4, 3, 16, 16) * 255, "targets": targets})
    assert emb.shape == (4, 16) and emb.requires_grad and torch.equal(out_targets, targets)
    model.eval()
    assert model(torch.rand(2, 3, 16, 16) * 255).shape == (2, 16)


def test_the_ir_se_backbone_gates_every_block():
    cfg = _cfg(False)
    cfg.MODEL.BACKBONE.NAME = "build_resnetIR_backbone"
    cfg.MODEL.BACKBONE.WITH_SE = True
    keys = build_model(cfg).state_dict().keys()
    assert "backbone.layer4.1.se.fc.2.weight" in keys


def test_class_shards_cover_the_classes_once():
    for n, w in ((7, 2), (10, 3), (4, 4)):
        shards = [class_shard(n, w, r) for r in range(w)]
        covered = [c for start, num in shards for c in range(start, start + num)]
        assert covered == list(range(n))


def test_partial_fc_with_every_centre_is_the_margin_softmax_cross_entropy():
    torch.manual_seed(0)
    pfc = PartialFC(6, 5, 1.0, "CosSoftmax", 16.0, 0.3, dtype=torch.float64)
    optimizer = torch.optim.SGD([pfc.sub_weight], lr=0.1, momentum=0.9)
    features = torch.randn(8, 6, dtype=torch.float64, requires_grad=True)
    targets = torch.tensor([0, 1, 2, 3, 4, 0, 1, 2])
    weight = pfc.weight.clone().requires_grad_(True)
    f_grad, loss = pfc.forward_backward(features, targets, optimizer)

    cls = build_cls_layer("CosSoftmax", 5, 16.0, 0.3)
    logits = cls(F.linear(F.normalize(features), F.normalize(weight)), targets)
    expected = F.cross_entropy(logits, targets)
    expected.backward()
    assert loss.item() == pytest.approx(expected.item(), abs=1e-12)
    torch.testing.assert_close(f_grad, features.grad, rtol=0, atol=1e-12)
    torch.testing.assert_close(pfc.sub_weight.grad, weight.grad, rtol=0, atol=1e-12)

    before = pfc.weight.clone()
    optimizer.step()
    pfc.momentum_from(optimizer)
    pfc.update()
    assert not torch.equal(pfc.weight, before)  # the optimizer stepped the centres themselves
    torch.testing.assert_close(pfc.weight, before - 0.1 * weight.grad, rtol=0, atol=1e-12)


def test_partial_fc_samples_the_batchs_classes_and_moves_only_the_sampled_centres():
    torch.manual_seed(1)
    pfc = PartialFC(4, 20, 0.25, "ArcSoftmax", 16.0, 0.2, dtype=torch.float64)
    assert pfc.num_sample == 5
    optimizer = torch.optim.SGD([pfc.sub_weight], lr=0.5, momentum=0.9, weight_decay=0.0)
    targets = torch.tensor([3, 3, 17, 11])
    before = pfc.weight.clone()
    f_grad, loss = pfc.forward_backward(torch.randn(4, 4, dtype=torch.float64), targets, optimizer)
    assert torch.isfinite(loss) and f_grad.shape == (4, 4)
    index = pfc.index.tolist()
    assert len(index) == 5 and {3, 11, 17} <= set(index) and index == sorted(index)
    assert optimizer.param_groups[-1]["params"][0] is pfc.sub_weight
    optimizer.step()
    pfc.momentum_from(optimizer)
    pfc.update()
    moved = (pfc.weight != before).any(dim=1).nonzero().flatten().tolist()
    assert set(moved) <= set(index) and {3, 11, 17} <= set(moved)
    assert (pfc.weight_mom[index].abs().sum(dim=1) > 0).all()
    untouched = [i for i in range(20) if i not in index]
    assert (pfc.weight_mom[untouched] == 0).all()

    # more classes in the batch than samples: all of them, no more
    targets = torch.arange(8)
    pfc.forward_backward(torch.randn(8, 4, dtype=torch.float64), targets, optimizer)
    assert pfc.index.tolist() == list(range(8))


def test_partial_fc_refuses_what_it_cannot_do():
    with pytest.raises(ValueError, match="SAMPLE_RATE must be in"):
        PartialFC(4, 10, 0.0, "CosSoftmax", 1.0, 0.0)
    pfc = PartialFC(4, 10, 1.0, "CosSoftmax", 1.0, 0.0)
    with pytest.raises(ValueError, match="holds 9 class centres .* has 10"):
        pfc.load_full_state({"weight": torch.zeros(9, 4)}, source="x.pth")
