"""Transforms: shapes, dtype, determinism from the per-sample generator, no global RNG use."""

from __future__ import annotations

import pytest
import torch

from fastreid.config import get_cfg
from fastreid.data.transforms import (
    AugMix,
    AutoAugment,
    PadRandomCrop,
    RandomErasing,
    RandomHorizontalFlip,
    RandomPatch,
    build_transforms,
)

ALL_KEYS = ("FLIP", "PADDING", "CJ", "AFFINE", "AUTOAUG", "AUGMIX", "REA", "RPT", "CROP")


def _img(seed=0, h=128, w=64):
    return torch.randint(0, 256, (3, h, w), dtype=torch.uint8, generator=torch.Generator().manual_seed(seed))


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _cfg(enabled=ALL_KEYS):
    cfg = get_cfg()
    for key in enabled:
        cfg.INPUT[key].ENABLED = True
    cfg.INPUT.AUTOAUG.PROB = 1.0
    cfg.INPUT.AUGMIX.PROB = 1.0
    cfg.INPUT.CROP.SIZE = [256, 128]
    return cfg


@pytest.mark.parametrize("key", ALL_KEYS)
def test_each_key_alone_shape_dtype_determinism(key):
    t = build_transforms(_cfg([key]), is_train=True)
    img = _img()
    outs = [t(img.clone(), _gen(s)) for s in range(6)]
    for o in outs:
        assert o.shape == (3, 256, 128) and o.dtype == torch.uint8
    assert torch.equal(t(img.clone(), _gen(3)), outs[3])
    if key not in ("AFFINE",):  # every random key changes pixels across some seeds
        assert any(not torch.equal(outs[0], o) for o in outs[1:]), key


def test_full_pipeline_deterministic_and_ignores_global_rng():
    t = build_transforms(_cfg(), is_train=True)
    img = _img(1)
    torch.manual_seed(0)
    a = t(img, _gen(11))
    torch.manual_seed(12345)
    b = t(img, _gen(11))
    assert torch.equal(a, b)
    assert not torch.equal(a, t(img, _gen(12)))
    assert torch.equal(img, _img(1))  # the input is never modified in place


def test_bagtricks_pipeline_and_test_pipeline():
    cfg = _cfg(("FLIP", "PADDING", "REA"))
    t = build_transforms(cfg, is_train=True)
    names = [type(x).__name__ for x in t.transforms]
    assert names == ["Resize", "PadRandomCrop", "RandomHorizontalFlip", "RandomErasing", "ToUint8"]
    test = build_transforms(cfg, is_train=False)
    img = _img(2)
    out = test(img, _gen(0))
    assert out.shape == (3, 256, 128) and torch.equal(out, test(img, _gen(99)))


def test_pad_random_crop_matches_pad_then_crop():
    import torch.nn.functional as tnf

    img = _img(3, 20, 10)
    t = PadRandomCrop(4, [20, 10])
    padded = tnf.pad(img, (4, 4, 4, 4))
    seen = set()
    for s in range(40):
        out = t(img, _gen(s))
        g = _gen(s)
        top = int(torch.randint(0, 9, (), generator=g))
        left = int(torch.randint(0, 9, (), generator=g))
        assert torch.equal(out, padded[:, top : top + 20, left : left + 10])
        seen.add((top, left))
    assert len(seen) > 10
    reflect = PadRandomCrop(4, [20, 10], padding_mode="reflect")
    assert reflect(img, _gen(0)).shape == (3, 20, 10)
    with pytest.raises(ValueError, match="PADDING.MODE"):
        PadRandomCrop(4, [20, 10], padding_mode="wrap")


def test_random_erasing_fills_value_on_255_scale():
    t = RandomErasing(p=1.0, value=[124.0, 116.0, 104.0])
    img = torch.zeros(3, 64, 32, dtype=torch.uint8)
    out = t(img, _gen(0))
    mask = out[0] == 124
    assert mask.any() and (out[1][mask] == 116).all() and (out[2][mask] == 104).all()
    assert int(img.sum()) == 0  # input untouched
    assert torch.equal(RandomErasing(p=0.0)(img, _gen(0)), img)


def test_autoaugment_augmix_randompatch_are_seeded():
    img = _img(4, 64, 32)
    for t in (AutoAugment(prob=1.0), AugMix(prob=1.0), RandomPatch(prob_happen=1.0)):
        a, b = t(img, _gen(5)), t(img, _gen(5))
        assert torch.equal(a, b) and a.dtype == torch.uint8 and a.shape == img.shape
        assert any(not torch.equal(t(img, _gen(s)), a) for s in range(6, 12)), type(t).__name__


def test_compose_accepts_pil_and_no_generator():
    from PIL import Image

    t = build_transforms(_cfg(("FLIP",)), is_train=True)
    pil = Image.new("RGB", (64, 128), (200, 10, 10))
    out = t(pil)
    assert out.shape == (3, 256, 128) and int(out[0].float().mean()) > 150


def test_horizontal_flip_mirrors_left_and_right_with_its_probability():
    img = _img(5)
    mirrored = img.flip(-1)  # columns reversed, rows kept
    assert torch.equal(RandomHorizontalFlip(p=1.0)(img, _gen(0)), mirrored)
    assert torch.equal(RandomHorizontalFlip(p=0.0)(img, _gen(0)), img)
    outs = [RandomHorizontalFlip(p=0.5)(img, _gen(seed)) for seed in range(200)]
    assert all(torch.equal(o, img) or torch.equal(o, mirrored) for o in outs)
    flipped = sum(torch.equal(o, mirrored) for o in outs)
    assert 70 <= flipped <= 130  # binomial(200, 0.5): outside this range once in ~10^4 seeds sets
    assert [torch.equal(RandomHorizontalFlip(p=0.5)(img, _gen(s)), mirrored) for s in range(20)] == [
        torch.equal(o, mirrored) for o in outs[:20]
    ]  # the per-sample generator decides, nothing else
