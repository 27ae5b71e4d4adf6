"""This package's layers, losses and backbone building blocks called as upstream's are called,
against what upstream's own code returned for the same calls (``data/upstream/api_reference.pt``,
written by ``data/make_upstream_api_reference.py`` from the cases in ``upstream_api_cases.py``)."""

from __future__ import annotations

import os

import pytest
import torch
from upstream_api_cases import CASES, run
from upstream_reference import DATA_DIR, REFERENCE_DTYPE, assert_matches_reference

from fastreid.modeling.backbones.mobilenetv3 import mobilenet_v3_config

REFERENCE = torch.load(os.path.join(DATA_DIR, "api_reference.pt"), map_location="cpu", weights_only=True)
SLOW = {"backbones_repvgg", "backbones_resnest", "backbones_resnet_resnext", "backbones_osnet"}


def assert_same(got, want, what: str) -> None:
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor), f"{what}: a {type(got).__name__}, not a tensor"
        assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)}, upstream's {tuple(want.shape)}"
        if want.dtype == REFERENCE_DTYPE or got.dtype == REFERENCE_DTYPE:
            assert_matches_reference(got.detach().to(REFERENCE_DTYPE), want, what)
        else:
            assert torch.equal(got, want), what
    elif isinstance(want, float):
        assert got == pytest.approx(want, rel=1e-12, abs=1e-12), what
    elif isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want), f"{what}: {got!r} != {want!r}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{what}[{i}]")
    else:
        assert got == want, what


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in CASES])
def test_matches_upstream(name):
    want = REFERENCE["cases"][name]
    got = run(name)
    assert sorted(got) == sorted(want)
    for key in want:
        assert_same(got[key], want[key], f"{name}: {key} (upstream {REFERENCE['commit'][:7]})")


def test_mobilenetv3_configs_match_upstream():
    for key, (rows, last) in REFERENCE["cases"]["mobilenetv3_configs"].items():
        arch, reduced, dilated, width = key.split(".", 3)
        settings, our_last = mobilenet_v3_config(arch, float(width[1:]), reduced == "r1", dilated == "d1")
        ours = [
            [
                c.input_channels,
                c.kernel,
                c.expanded_channels,
                c.out_channels,
                c.use_se,
                c.use_hs,
                c.stride,
                c.dilation,
            ]
            for c in settings
        ]
        assert (ours, our_last) == (rows, last), key


def test_every_case_is_recorded():
    assert sorted(REFERENCE["cases"]) == sorted([*CASES, "mobilenetv3_configs"])
