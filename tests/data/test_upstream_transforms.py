"""Upstream's transform API (``functional``, ``autoaugment``, ``ToTensor``, ``RandomPatch``,
``AugMix``) against numbers recorded from upstream's own functions (``data/upstream_transforms.npz``,
written by ``data/make_upstream_transforms.py``), and working on PIL images and uint8 tensors."""

from __future__ import annotations

import json
import os
import random

import numpy as np
import pytest
import torch
from PIL import Image

from fastreid.data.transforms import autoaugment as aa
from fastreid.data.transforms import functional as F
from fastreid.data.transforms.transforms import AugMix, RandomPatch, ToTensor

DATA = os.path.join(os.path.dirname(__file__), "data", "upstream_transforms.npz")
PIL_OPS = ["autocontrast", "equalize", "posterize", "rotate", "solarize", "shear_x", "shear_y",
           "translate_x", "translate_y", "color", "contrast", "brightness", "sharpness"]  # fmt: skip


@pytest.fixture(scope="module")
def ref():
    with np.load(DATA) as d:
        return {k: d[k] for k in d.files}


def reference_image() -> Image.Image:
    rng = np.random.default_rng(5)
    return Image.fromarray(rng.integers(0, 256, (24, 16, 3), dtype=np.uint8))


def test_to_tensor_matches_upstream(ref):
    img = reference_image()
    np.testing.assert_array_equal(F.to_tensor(np.asarray(img)).numpy(), ref["to_tensor_array"])
    np.testing.assert_array_equal(ToTensor()(img).numpy(), ref["to_tensor_pil"])
    assert F.to_tensor(img).dtype == torch.float32 and float(F.to_tensor(img).max()) > 1  # 0..255


@pytest.mark.parametrize("k, name", list(enumerate(PIL_OPS)))
def test_pil_ops_match_upstream_bit_for_bit(ref, k, name):
    np.random.seed(100 + k)  # the ops draw their level and sign from numpy's global generator
    out = getattr(F, name)(reference_image(), 3)
    np.testing.assert_array_equal(np.asarray(out), ref[f"op_{name}"])


def test_level_helpers():
    assert F.int_parameter(5, 30) == 15 and F.float_parameter(5, 0.3) == pytest.approx(0.15)
    np.random.seed(0)
    levels = [F.sample_level(3) for _ in range(100)]
    assert min(levels) >= 0.1 and max(levels) < 3


def test_autoaugment_levels_match_upstream(ref):
    levels = json.loads(str(ref["levels"]))
    assert set(levels) == set(aa._OPS)
    for name, want in levels.items():
        level_fn = aa._OPS[name][1]
        random.seed(0)
        got = [list(level_fn(lv, dict(aa._HPARAMS_DEFAULT))) if level_fn else [] for lv in range(11)]
        np.testing.assert_allclose(np.array(got, dtype=float), np.array(want, dtype=float), err_msg=name)


@pytest.mark.parametrize("name", ["original", "originalr", "v0", "v0r"])
def test_policies_match_upstream(ref, name):
    want = json.loads(str(ref["policies"]))[name]
    got = aa.auto_augment_policy(name)
    assert len(got) == len(want)
    for sub_got, sub_want in zip(got, want):
        for op, (fn_name, prob, magnitude) in zip(sub_got, sub_want):
            assert (op.aug_fn.__name__, op.prob) == (fn_name, prob)
            if op.level_fn is not None:  # the level of a magnitude-free op (AutoContrast...) is unused
                assert op.magnitude == magnitude, (name, fn_name)


@pytest.mark.parametrize(
    "build, config",
    [
        (aa.auto_augment_transform, "original-mstd0.5"),
        (aa.auto_augment_transform, "v0r"),
        (aa.rand_augment_transform, "rand-m9-n3-mstd0.5-w0"),
        (aa.rand_augment_transform, "rand-m5-inc1"),
        (aa.augment_and_mix_transform, "augmix-m5-w4-d2"),
        (aa.augment_and_mix_transform, "augmix-m3-b1"),
    ],
)
def test_config_string_transforms_run_on_pil_images(build, config):
    random.seed(1)
    np.random.seed(1)
    transform = build(config, {"translate_const": 10, "img_mean": (124, 116, 104)})
    img = reference_image()
    out = transform(img)
    assert isinstance(out, Image.Image) and out.size == img.size and out.mode == "RGB"


def test_unknown_config_sections_and_ops_are_clear_errors():
    with pytest.raises(ValueError, match="unknown RandAugment config section 'x'"):
        aa.rand_augment_transform("rand-x3", {})
    with pytest.raises(ValueError, match="starting with 'augmix'"):
        aa.augment_and_mix_transform("rand-m3", {})
    with pytest.raises(ValueError, match="Unknown AutoAugment policy 'v9'"):
        aa.auto_augment_policy("v9")
    with pytest.raises(ValueError, match="Unknown augmentation op 'Blur'"):
        aa.AugmentOp("Blur")


def test_autoaugment_on_pil_tensors_and_with_a_policy():
    img = reference_image()
    tensor = torch.from_numpy(np.asarray(img).copy()).permute(2, 0, 1).contiguous()
    seeded = aa.AutoAugment()
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert torch.equal(seeded(tensor, g1), seeded(tensor, g2))  # the seeded pipeline: same key, same output
    assert isinstance(seeded(img), Image.Image)
    random.seed(0)
    upstream_style = aa.AutoAugment(aa.auto_augment_policy("original"))
    assert isinstance(upstream_style(img), Image.Image)
    assert isinstance(upstream_style(tensor), torch.Tensor)


def test_augmix_and_random_patch_take_upstreams_arguments(fr_log):
    img = torch.from_numpy(np.asarray(reference_image()).copy()).permute(2, 0, 1).contiguous()
    mix = AugMix(prob=1.0, aug_prob_coeff=0.1, mixture_width=3, mixture_depth=1, aug_severity=1)
    g = torch.Generator().manual_seed(0)
    out = mix(img, g)
    assert out.shape == img.shape and out.dtype == torch.uint8
    patch = RandomPatch(prob_happen=1.0, pool_capacity=10, min_sample_size=2)
    assert any("have no effect" in r.getMessage() for r in fr_log.records)
    assert patch(img, torch.Generator().manual_seed(1)).shape == img.shape
