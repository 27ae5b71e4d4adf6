"""ClusterContrast itself: InfoNCE over the memory with the gradient of a plain product, the memory
moved only by a training step's backward pass (image after image), untouched by precise-BN passes,
and restored from a checkpoint bit for bit."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from uda_helpers import CONFIG

from fastreid.projects.uda import ClusterContrast, PseudoLabelHook, TargetImages, update_centroids
from fastreid.projects.uda.cluster_contrast import _MemoryLogits


@pytest.fixture(scope="module")
def model(tiny_resnet18_opts):
    from fastreid.config import get_cfg
    from fastreid.modeling import build_model

    cfg = get_cfg()
    cfg.merge_from_file(CONFIG)
    cfg.merge_from_list([*tiny_resnet18_opts, "MODEL.PRECISION", "fp32", "UDA.MEMORY.MOMENTUM", 0.2])
    torch.manual_seed(0)
    return build_model(cfg, log_summary=False)


def batch(targets):
    g = torch.Generator().manual_seed(1)
    return {
        "images": torch.rand(len(targets), 3, 64, 32, generator=g) * 255,
        "targets": torch.tensor(targets),
    }


def test_loss_and_gradient_are_infonce_over_the_memory(model):
    assert isinstance(model, ClusterContrast) and model.momentum == 0.2 and model.temperature == 0.05
    model.train()
    model.set_memory(torch.randn(5, 512, generator=torch.Generator().manual_seed(2)))
    before = model.memory.clone()
    data = batch([0, 0, 3, 3, 4, 1])
    loss = model(data)["loss_contrast"]
    assert torch.equal(model.memory, before)  # the forward pass leaves the memory alone

    feats = F.normalize(model.neck_features(model.preprocess_image(data)), dim=1)
    want = F.cross_entropy(feats @ before.t() / 0.05, data["targets"])
    torch.testing.assert_close(loss, want)
    # the custom product's gradient is the plain product's (the memory as in the forward pass)
    plain_in = feats.detach().double().requires_grad_(True)
    custom_in = feats.detach().double().requires_grad_(True)
    grad_out = torch.randn(6, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    (plain_in @ before.double().t()).backward(grad_out)
    _MemoryLogits.apply(custom_in, data["targets"], before.double().clone(), 0.2).backward(grad_out)
    torch.testing.assert_close(custom_in.grad, plain_in.grad, rtol=0, atol=1e-12)

    loss.backward()  # the memory moves now, image after image
    expected = before.clone()
    update_centroids(expected, feats.detach(), data["targets"], 0.2)
    torch.testing.assert_close(model.memory, expected)
    assert torch.equal(model.memory[2], before[2])  # a cluster without an image in the batch
    torch.testing.assert_close(model.memory.norm(dim=1), torch.ones(5))


def test_update_centroids_is_sequential_per_image():
    memory = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    feats = torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=torch.float64)
    update_centroids(memory, feats, torch.tensor([0, 0]), 0.25)  # c <- 0.25 c + 0.75 f
    first = torch.tensor([0.25, 0.75]) / torch.tensor([0.25, 0.75]).norm()  # then the second image
    second = 0.25 * first + 0.75 * torch.tensor([1.0, 0.0])
    torch.testing.assert_close(memory[0], (second / second.norm()).double())
    assert torch.equal(memory[1], torch.tensor([0.0, 1.0], dtype=torch.float64))


def test_precise_bn_passes_and_bad_input_leave_the_memory(model):
    model.train()
    model.set_memory(torch.eye(4, 512))
    before = model.memory.clone()
    out = model(batch([-1, -1, -1, -1]))  # upstream's mark of a precise-BN pass
    assert float(out["loss_contrast"]) == 0.0 and torch.equal(model.memory, before)
    with pytest.raises(ValueError, match="pseudo label 7 names no centroid of the memory \\(4\\)"):
        model(batch([0, 7]))
    model.memory = torch.zeros(0, 512)
    with pytest.raises(RuntimeError, match="no cluster memory"):
        model(batch([0, 1]))
    model.eval()
    assert model(batch([0, 1])).shape == (2, 512)  # evaluation: Baseline's features


def test_the_memory_comes_back_from_a_checkpoint_bit_for_bit(model):
    """The memory a training step leaves is not re-normalised on resume: scaling unit rows again
    changes their last bits (a resumed run then drifted from the uninterrupted one)."""
    memory = F.normalize(torch.randn(40, 512, generator=torch.Generator().manual_seed(3)), dim=1)
    feats = F.normalize(torch.randn(64, 512, generator=torch.Generator().manual_seed(4)), dim=1)
    update_centroids(memory, feats, torch.arange(64) % 40, 0.1)
    assert not torch.equal(F.normalize(memory, dim=1), memory)  # what re-normalising would do
    target = TargetImages([f"{i}.jpg" for i in range(50)], [0] * 50)
    hook = PseudoLabelHook(cfg=None, target=target)
    hook.trainer = SimpleNamespace(model=model)
    model.set_memory(memory, normalize=False)
    hook.labels, hook.labelled_epoch = np.arange(50) % 40, 3
    state = hook.state_dict()
    model.memory = torch.zeros(0, 512)
    restored = PseudoLabelHook(cfg=None, target=target)
    restored.trainer = SimpleNamespace(model=model)
    restored.load_state_dict(state)
    assert torch.equal(model.memory, memory) and restored.labelled_epoch == 3
    np.testing.assert_array_equal(restored.labels, np.arange(50) % 40)
    # a checkpoint of another target is not used
    other = PseudoLabelHook(cfg=None, target=TargetImages(["a.jpg"], [0]))
    other.trainer = SimpleNamespace(model=model)
    other.load_state_dict(state)
    assert other.labels is None and other.labelled_epoch == -1
