"""MoCo (memory queue loss), Distiller (teachers from KD.*, KD loss) and MGN details, against
hand-written reference computations."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from test_baseline import tiny_cfg as baseline_cfg

from fastreid.config import ConfigError
from fastreid.modeling import build_model
from fastreid.modeling.meta_arch.distiller import jsdiv_loss


def tiny_cfg(**overrides):
    """test_baseline's tiny ResNet-18 config, cross-entropy only."""
    return baseline_cfg(**{"MODEL.LOSSES.NAME": ("CrossEntropyLoss",), **overrides})


def batch(n=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {
        "images": torch.randint(0, 256, (n, 3, 64, 32), generator=g, dtype=torch.uint8),
        "targets": torch.tensor([0, 0, 3, 3, 1, 1, 2, 2][:n]),
    }


def memory_loss_reference(feat, targets, queue, labels, own_cols, margin=0.25, gamma=32.0):
    """The MoCo memory loss written out sample by sample."""
    feat = F.normalize(feat, dim=1)
    total = 0.0
    for i in range(feat.size(0)):
        sims = feat[i] @ queue
        pos = [sims[j] for j in range(queue.size(1)) if labels[j] == targets[i] and j != own_cols[i]]
        neg = [sims[j] for j in range(queue.size(1)) if labels[j] != targets[i]]
        lp = torch.logsumexp(torch.stack([-gamma * s for s in pos]), 0) if pos else torch.tensor(-1e8)
        ln = torch.logsumexp(torch.stack([gamma * (s + margin) for s in neg]), 0)
        total = total + F.softplus(lp + ln)
    return total / feat.size(0)


def test_moco_memory_loss_and_queue():
    torch.manual_seed(0)
    model = build_model(
        tiny_cfg(**{"MODEL.META_ARCHITECTURE": "MoCo", "MODEL.QUEUE_SIZE": 8}), log_summary=False
    )
    assert model.memory.queue.shape == (512, 8)
    assert {"memory.queue", "memory.queue_label", "memory.queue_ptr"} <= set(model.state_dict())
    model.train()
    for step, ptr in enumerate((0, 4)):  # the second batch goes to columns 4..7
        b = batch(seed=step)
        captured = {}
        memory_forward = model.memory.forward

        def spy(feat, targets, _forward=memory_forward, captured=captured):
            captured["feat"] = feat.detach().clone()
            return _forward(feat, targets)

        model.memory.forward = spy
        losses = model(b)
        del model.memory.forward
        assert set(losses) == {"loss_cls", "loss_mb"}
        queue, labels = model.memory.queue, model.memory.queue_label[0]
        assert torch.equal(labels[ptr : ptr + 4], b["targets"])
        expected = memory_loss_reference(
            captured["feat"], b["targets"], queue, labels, [ptr + i for i in range(4)]
        )
        torch.testing.assert_close(losses["loss_mb"].detach(), expected, rtol=1e-5, atol=1e-5)
        sum(losses.values()).backward()
    assert int(model.memory.queue_ptr) == 0
    with pytest.raises(ValueError, match="multiple of the batch size"):
        model(batch(n=3))


def test_jsdiv_loss_by_hand():
    s = torch.tensor([[1.0, 2.0, 0.5]])
    t = torch.tensor([[0.5, 1.0, 3.0]])
    temp = 2.0

    def kl(p_logits, q_logits):  # KL(softmax(q) || softmax(p)) as F.kl_div(log p, q) computes it
        p, q = F.softmax(p_logits / temp, 1), F.softmax(q_logits / temp, 1)
        return float((q * (q.log() - p.log())).sum()) * temp**2

    assert float(jsdiv_loss(s, t, temp)) == pytest.approx((kl(s, t) + kl(t, s)) / 2, rel=1e-5)
    assert float(jsdiv_loss(s, s, temp)) == pytest.approx(0.0, abs=1e-6)


@pytest.fixture
def teacher_files(tmp_path):
    cfg = tiny_cfg(**{"MODEL.BACKBONE.DEPTH": "34x"})
    config = tmp_path / "teacher.yaml"
    config.write_text(cfg.dump())
    torch.manual_seed(3)
    teacher = build_model(cfg, log_summary=False)
    weights = tmp_path / "teacher.pth"
    torch.save({"model": teacher.state_dict()}, weights)
    return str(config), str(weights), teacher.state_dict()


@pytest.mark.slow
def test_distiller_loads_teacher_and_adds_kd_loss(teacher_files):
    config, weights, teacher_state = teacher_files
    cfg = tiny_cfg(
        **{"MODEL.META_ARCHITECTURE": "Distiller", "KD.MODEL_CONFIG": [config], "KD.MODEL_WEIGHTS": [weights]}
    )
    torch.manual_seed(0)
    model = build_model(cfg, log_summary=False)
    baseline = build_model(tiny_cfg(), log_summary=False)
    assert set(model.state_dict()) == set(baseline.state_dict())  # checkpoints hold the student only
    (teacher,) = model.model_ts
    for k, v in teacher.state_dict().items():
        if not k.endswith("num_batches_tracked"):
            assert torch.equal(v, teacher_state[k]), k
    assert not any(p.requires_grad for p in teacher.parameters())

    model.train()
    b = batch()
    teacher_before = {k: v.clone() for k, v in teacher.named_parameters()}
    losses = model(b)
    assert set(losses) == {"loss_cls", "loss_jsdiv"}
    # the KD term from the student's and teacher's class logits, computed here independently
    with torch.no_grad():
        images = model.preprocess_image(b)
        t_logits = teacher.heads(teacher.backbone(images), b["targets"])["pred_class_logits"]
        s_logits = model.heads(model.backbone(images), b["targets"])["pred_class_logits"]
    torch.testing.assert_close(losses["loss_jsdiv"].detach(), jsdiv_loss(s_logits, t_logits, 16.0))
    assert float(losses["loss_jsdiv"].detach()) > 0
    sum(losses.values()).backward()
    assert all(torch.equal(v, teacher_before[k]) for k, v in teacher.named_parameters())
    assert model.backbone.conv1.weight.grad is not None
    assert t_logits.shape == (4, 4)

    model.eval()
    with torch.no_grad():
        assert model(b).shape == (4, 512)
    model.to(torch.float64)
    assert teacher.backbone.conv1.weight.dtype == torch.float64


@pytest.mark.slow
def test_distiller_ema_self_distillation_and_errors(teacher_files):
    cfg = tiny_cfg(**{"MODEL.META_ARCHITECTURE": "Distiller", "KD.EMA.ENABLED": True, "KD.EMA.MOMENTUM": 0.5})
    model = build_model(cfg, log_summary=False).train()
    (ema,) = model.model_ts
    assert torch.equal(ema.backbone.conv1.weight, model.backbone.conv1.weight)
    with torch.no_grad():
        model.backbone.conv1.weight.add_(1.0)
    before = ema.backbone.conv1.weight.clone()
    model(batch())
    torch.testing.assert_close(ema.backbone.conv1.weight, 0.5 * before + 0.5 * model.backbone.conv1.weight)

    with pytest.raises(ConfigError, match="at least one teacher"):
        build_model(tiny_cfg(**{"MODEL.META_ARCHITECTURE": "Distiller"}), log_summary=False)
    config, weights, _ = teacher_files
    with pytest.raises(ConfigError, match="one weight file per teacher"):
        build_model(
            tiny_cfg(**{"MODEL.META_ARCHITECTURE": "Distiller", "KD.MODEL_CONFIG": [config]}),
            log_summary=False,
        )
    with pytest.raises(ConfigError, match="not found"):
        build_model(
            tiny_cfg(
                **{
                    "MODEL.META_ARCHITECTURE": "Distiller",
                    "KD.MODEL_CONFIG": ["nope.yml"],
                    "KD.MODEL_WEIGHTS": [weights],
                }
            ),
            log_summary=False,
        )


@pytest.mark.slow
def test_mgn_errors_and_freeze_names():
    cfg = tiny_cfg(**{"MODEL.META_ARCHITECTURE": "MGN"})
    with pytest.raises(ConfigError, match="ResNet-50/101"):
        build_model(cfg, log_summary=False)
    cfg = tiny_cfg(
        **{
            "MODEL.META_ARCHITECTURE": "MGN",
            "MODEL.BACKBONE.DEPTH": "50x",
            "MODEL.BACKBONE.FEAT_DIM": 2048,
            "MODEL.HEADS.EMBEDDING_DIM": 16,
            "MODEL.LOSSES.NAME": ("CrossEntropyLoss", "TripletLoss"),
        }
    )
    model = build_model(cfg, log_summary=False)
    assert model.freeze(["backbone", "b1", "b2", "b3"]) == ["backbone", "b1", "b2", "b3"]
    model.unfreeze()
    model.eval()
    for height in (32, 64):  # 2 and 4 rows cannot be cut into 3 stripes
        with pytest.raises(ValueError, match="2 and 3 stripes"):
            model({"images": torch.zeros(1, 3, height, 32)})
    with torch.no_grad():
        assert model({"images": torch.zeros(2, 3, 96, 32)}).shape == (2, 8 * 16)


def test_moco_memory_takes_upstreams_arguments():
    from fastreid.modeling.meta_arch.moco import Memory

    memory = Memory(16, K=64)
    assert memory.K == 64 and memory.queue.shape == (16, 64)
    assert Memory().queue.shape == (512, 65536)
