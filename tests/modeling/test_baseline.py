"""Baseline: preprocessing, train/eval outputs, errors, freezing and the build summary."""

import pytest
import torch

from fastreid.config import ConfigError, get_cfg
from fastreid.modeling import build_model, freeze_modules, unfreeze_modules
from fastreid.modeling.meta_arch.baseline import SUPPORTED_LOSSES


def tiny_cfg(**overrides):
    cfg = get_cfg()
    cfg.MODEL.DEVICE = "cpu"
    cfg.MODEL.BACKBONE.DEPTH = "18x"
    cfg.MODEL.BACKBONE.FEAT_DIM = 512
    cfg.MODEL.BACKBONE.PRETRAIN = False
    cfg.MODEL.HEADS.NUM_CLASSES = 4
    cfg.MODEL.HEADS.WITH_BNNECK = True
    cfg.INPUT.SIZE_TEST = [64, 32]
    cfg.merge_from_list([x for kv in overrides.items() for x in kv])
    return cfg


BATCH = {
    "images": torch.randint(0, 256, (4, 3, 64, 32), dtype=torch.uint8),
    "targets": torch.tensor([0, 0, 3, 3]),
    "camids": torch.tensor([0, 1, 0, 1]),
    "img_paths": ["a", "b", "c", "d"],
}


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return build_model(tiny_cfg(**{"MODEL.LOSSES.NAME": tuple(SUPPORTED_LOSSES)}), log_summary=False)


def test_pixel_buffers_and_device(model):
    assert "pixel_mean" not in model.state_dict()
    assert model.pixel_mean.shape == (1, 3, 1, 1)
    assert model.device == torch.device("cpu")
    normed = model.preprocess_image(BATCH)
    expected = (BATCH["images"].float() - model.pixel_mean) / model.pixel_std
    torch.testing.assert_close(normed, expected)
    # float input on 0..255 gives the same
    torch.testing.assert_close(model.preprocess_image(BATCH["images"].float()), expected)


def test_train_and_eval_outputs(model):
    model.train()
    losses = model(BATCH)
    assert set(losses) == {"loss_cls", "loss_triplet", "loss_circle", "loss_cosface", "loss_focal"}
    sum(losses.values()).backward()
    assert model.backbone.conv1.weight.grad is not None
    model.eval()
    with torch.no_grad():
        feats = model(BATCH)
    assert feats.shape == (4, 512)


def test_batch_errors(model):
    model.train()
    with pytest.raises(ValueError, match="'targets'"):
        model({"images": BATCH["images"]})
    with pytest.raises(ValueError, match=r"Target ids must lie in \[0, 4\)"):
        model({"images": BATCH["images"], "targets": torch.tensor([0, 0, 7, 7])})
    with pytest.raises(ValueError, match="N x 3 x H x W"):
        model({"images": torch.zeros(4, 64, 32), "targets": BATCH["targets"]})
    with pytest.raises(ValueError, match="no 'images'"):
        model({"targets": BATCH["targets"]})


def test_negative_targets_mean_forward_only(model):
    # upstream's precise-BN convention: ids unknown to the classifier are marked negative
    model.train()
    losses = model({"images": BATCH["images"], "targets": torch.full((4,), -1)})
    assert torch.isfinite(losses["loss_cls"])


def test_a_subclass_gets_its_float_targets_and_integer_ids_become_int64(model):
    """Upstream's FastAttr overrides ``losses`` and feeds multi-label float targets through
    Baseline.forward: they reach it as floats; int32 ids reach the built-in losses as int64."""
    from fastreid.modeling.meta_arch.baseline import Baseline

    seen = []

    class MultiLabel(Baseline):
        def losses(self, outputs, gt_labels):
            seen.append(gt_labels)
            return {"loss_bce": torch.nn.functional.binary_cross_entropy_with_logits(
                outputs["cls_outputs"], gt_labels)}  # fmt: skip

    attr = MultiLabel(**MultiLabel.from_config(tiny_cfg())).train()
    attributes = torch.tensor([[1.0, 0.0, 1.0, 0.0]]).repeat(4, 1)
    loss = attr({"images": BATCH["images"], "targets": attributes})["loss_bce"]
    assert seen[0].dtype == torch.float32 and torch.equal(seen[0], attributes) and torch.isfinite(loss)
    model.train()
    as_int32 = model({"images": BATCH["images"], "targets": BATCH["targets"].int()})
    assert torch.isfinite(sum(as_int32.values()))


def test_config_errors():
    # (a task family imported earlier in this process adds its own, e.g. AttrBaseline)
    with pytest.raises(ConfigError, match="'Nope' is unknown; supported: ") as err:
        build_model(tiny_cfg(**{"MODEL.META_ARCHITECTURE": "Nope"}))
    supported = str(err.value).rsplit("supported: ", 1)[1].split(", ")
    assert {"Baseline", "Distiller", "MGN", "MoCo"} <= set(supported)
    with pytest.raises(ConfigError, match="FEAT_DIM is 2048 but.*outputs 512 channels"):
        build_model(tiny_cfg(**{"MODEL.BACKBONE.FEAT_DIM": 2048}), log_summary=False)
    with pytest.raises(ConfigError, match="'ContrastiveLoss' not supported"):
        build_model(tiny_cfg(**{"MODEL.LOSSES.NAME": ("ContrastiveLoss",)}), log_summary=False)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the fallback where CUDA is missing")
def test_cuda_device_without_cuda_falls_back_to_the_cpu():
    model = build_model(tiny_cfg(**{"MODEL.DEVICE": "cuda"}), log_summary=False)
    assert next(model.parameters()).device.type == "cpu"


def test_freeze_and_unfreeze():
    torch.manual_seed(0)
    model = build_model(tiny_cfg(), log_summary=False)
    model.train()
    assert freeze_modules(model, ["backbone", "b1"]) == ["backbone"]
    model.train()  # e.g. after an evaluation: the frozen backbone stays in eval mode
    assert not model.backbone.training and not model.backbone.bn1.training and model.heads.training
    assert all(not p.requires_grad for p in model.backbone.parameters())
    stats = model.backbone.bn1.running_mean.clone()
    sum(model(BATCH).values()).backward()
    assert torch.equal(model.backbone.bn1.running_mean, stats)
    assert model.backbone.conv1.weight.grad is None and model.heads.weight.grad is not None

    assert unfreeze_modules(model) == ["backbone"]
    assert model.backbone.training
    assert all(p.requires_grad for p in model.backbone.parameters())
    assert not model.heads.bottleneck[0].bias.requires_grad  # stays as built


def test_freeze_keeping_gradients_for_ddp():
    model = build_model(tiny_cfg(), log_summary=False).train()
    freeze_modules(model, ["backbone"], stop_gradients=False)
    assert not model.backbone.training and model.backbone.conv1.weight.requires_grad
    assert len(model.frozen_parameters()) == len(list(model.backbone.parameters()))
    unfreeze_modules(model)
    assert model.frozen_parameters() == [] and model.backbone.training


def test_losses_are_float32_under_autocast(model):
    model.train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        losses = model(BATCH)
    assert all(v.dtype == torch.float32 for v in losses.values())


def test_a_double_model_computes_its_losses_in_double():
    """float32 is the floor for losses (mixed precision), not a cap: a float64 model (the upstream
    parity tests run in double) keeps its losses in float64."""
    torch.manual_seed(0)
    model = build_model(tiny_cfg(), log_summary=False).double().train()
    losses = model(BATCH)
    assert all(v.dtype == torch.float64 for v in losses.values()), {k: v.dtype for k, v in losses.items()}


def test_build_logs_summary(fr_log):
    build_model(tiny_cfg())
    assert "parameters" in fr_log.text and "FLOPs (multiply-adds) for one 64x32 image" in fr_log.text


def test_summary_never_fails_the_build(monkeypatch, fr_log):
    from fastreid.modeling import summary

    def broken(*args, **kwargs):
        raise RuntimeError("tracer exploded")

    monkeypatch.setattr(summary, "count_flops", broken)
    model = build_model(tiny_cfg())
    assert model is not None and "FLOPs not counted (RuntimeError: tracer exploded)" in fr_log.text
