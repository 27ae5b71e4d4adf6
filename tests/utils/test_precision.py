"""The precision decider under forced CPU facts: the choice, its reason, and the errors (any CPU)."""

from __future__ import annotations

import pytest
import torch

from fastreid.config import ConfigError, get_cfg, validate_config
from fastreid.utils import precision
from fastreid.utils.platform import cpuinfo_flags
from fastreid.utils.precision import (
    FORCE_BF16_ENV,
    PrecisionError,
    cpu_facts,
    decide,
    forced_cpu,
    native_bf16,
    precision_of_cfg,
)

# Every fact forced, so the decision is the same on any machine.
AVX512_BF16 = {
    "bf16_features": ("avx512_bf16",),
    "arch": "x86_64",
    "aten_capability": "AVX512",
    "onednn": True,
    "onednn_bf16": True,
    "onednn_isa_cap": None,
}
AMX = {**AVX512_BF16, "bf16_features": ("avx512_bf16", "amx_bf16")}
ARM_BF16 = {**AVX512_BF16, "bf16_features": ("bf16",), "arch": "aarch64", "aten_capability": "DEFAULT"}
AVX2_ONLY = {**AVX512_BF16, "bf16_features": (), "aten_capability": "AVX2", "onednn_bf16": False}
ARM_WITHOUT_BF16 = {**ARM_BF16, "bf16_features": ()}


@pytest.fixture(autouse=True)
def no_force_env(monkeypatch):
    monkeypatch.delenv(FORCE_BF16_ENV, raising=False)


@pytest.mark.parametrize(
    ("facts", "feature"), [(AVX512_BF16, "avx512_bf16"), (AMX, "amx_bf16"), (ARM_BF16, "bf16")]
)
def test_auto_picks_bf16_and_channels_last_where_bf16_is_native(facts, feature):
    with forced_cpu(**facts):
        d = decide("auto", "cpu")
    assert d.precision == "bf16"
    assert d.train_dtype is torch.bfloat16 and d.eval_dtype is torch.bfloat16
    assert d.channels_last
    assert feature in d.reason and "MODEL.PRECISION auto" in d.reason
    assert d.describe().startswith("Precision: bf16 autocast + channels_last (CPU has ")


@pytest.mark.parametrize("facts", [AVX2_ONLY, ARM_WITHOUT_BF16])
def test_auto_picks_fp32_where_bf16_would_be_emulated(facts):
    with forced_cpu(**facts):
        d = decide("auto", "cpu")
    assert d.precision == "fp32" and d.train_dtype is None and d.eval_dtype is None
    assert d.channels_last  # measured faster on the CPU in float32 too
    assert "lacks" in d.reason
    assert d.describe() == f"Precision: fp32 + channels_last ({d.reason})"


def test_amp_on_a_cpu_without_native_bf16_runs_fp32_and_says_why():
    with forced_cpu(**AVX2_ONLY):
        d = decide("auto", "cpu", amp=True)
    assert d.train_dtype is None
    assert "SOLVER.AMP.ENABLED True not applied" in d.reason


def test_amp_off_still_uses_native_bf16():
    with forced_cpu(**AVX512_BF16):
        assert decide("auto", "cpu", amp=False).precision == "bf16"


def test_explicit_fp32_wins_over_amp_and_native_bf16():
    with forced_cpu(**AMX):
        d = decide("fp32", "cpu", amp=True)
    assert d.precision == "fp32" and d.train_dtype is None
    assert "does not apply" in d.reason


def test_explicit_bf16_without_native_bf16_is_an_error_naming_what_is_missing():
    with forced_cpu(**AVX2_ONLY), pytest.raises(PrecisionError) as info:
        decide("bf16", "cpu")
    message = str(info.value)
    assert "\n" not in message
    assert "lacks avx512_bf16 and amx_bf16" in message
    assert FORCE_BF16_ENV in message and "MODEL.PRECISION auto or fp32" in message


def test_the_environment_variable_forces_bf16_for_testing(monkeypatch):
    monkeypatch.setenv(FORCE_BF16_ENV, "1")
    with forced_cpu(**AVX2_ONLY):
        d = decide("bf16", "cpu")
    assert d.precision == "bf16" and f"forced by {FORCE_BF16_ENV}" in d.reason


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ({"onednn": False}, "no oneDNN"),
        ({"onednn_bf16": False}, "oneDNN cannot run bfloat16"),
        ({"onednn_isa_cap": "AVX2"}, "ONEDNN_MAX_CPU_ISA=AVX2"),
        ({"aten_capability": "DEFAULT"}, "ATEN_CPU_CAPABILITY=default"),
    ],
)
def test_a_torch_held_below_the_cpu_makes_bf16_emulated(override, fragment):
    with forced_cpu(**{**AVX512_BF16, **override}):
        native, fact = native_bf16()
        d = decide("auto", "cpu")
    assert not native and fragment in fact
    assert d.precision == "fp32"


def test_onednn_caps_at_or_above_the_bf16_isa_keep_it_native():
    for cap in ("AVX512_CORE_BF16", "AVX512_CORE_AMX", "ALL"):
        with forced_cpu(**{**AVX512_BF16, "onednn_isa_cap": cap}):
            assert native_bf16()[0], cap


def test_channels_last_setting():
    with forced_cpu(**AVX512_BF16):
        assert not decide("auto", "cpu", channels_last=False).channels_last
        assert decide("fp32", "cpu", channels_last="auto").channels_last
    assert not decide("auto", "cuda").channels_last  # auto: off on CUDA
    assert decide("auto", "cuda", channels_last=True).channels_last
    with pytest.raises(PrecisionError, match="MODEL.CHANNELS_LAST 'yes' is unknown"):
        decide("auto", "cpu", channels_last="yes")


def test_unknown_precision_is_an_error():
    with pytest.raises(
        PrecisionError, match="MODEL.PRECISION 'fp16' is unknown; use one of auto, fp32, bf16"
    ):
        decide("fp16", "cpu")


def test_cuda_keeps_upstreams_amp(monkeypatch):
    d = decide("auto", "cuda", amp=True)
    assert d.train_dtype is torch.float16 and d.eval_dtype is None  # upstream evaluates in float32
    assert "training" in d.describe() and "SOLVER.AMP.ENABLED True" in d.reason
    assert decide("auto", "cuda:1", amp=False).train_dtype is None
    assert decide("fp32", "cuda", amp=True).train_dtype is None
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert decide("bf16", "cuda").eval_dtype is torch.bfloat16
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    with pytest.raises(PrecisionError, match="no bfloat16"):
        decide("bf16", "cuda")


def test_autocast_contexts():
    with forced_cpu(**AVX512_BF16):
        bf16, fp32 = decide("auto", "cpu"), decide("fp32", "cpu")
    with bf16.autocast(training=False):
        assert torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16
    with fp32.autocast(training=True):
        assert not torch.is_autocast_enabled("cpu")


def test_forced_facts_nest_and_reject_unknown_names():
    real = cpu_facts()
    with forced_cpu(**AVX2_ONLY):
        with forced_cpu(bf16_features=["amx_bf16"]):
            assert cpu_facts().bf16_features == ("amx_bf16",)
            assert cpu_facts().aten_capability == "AVX2"
        assert cpu_facts().bf16_features == ()
    assert cpu_facts() == real
    with pytest.raises(TypeError, match="unknown fact"), forced_cpu(avx512=True):
        pass


def test_cpu_flags_are_read_from_cpuinfo(tmp_path):
    x86 = tmp_path / "x86"
    x86.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16\n\nprocessor\t: 1\n")
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd bf16 i8mm\n")
    assert "avx512_bf16" in cpuinfo_flags(str(x86))
    assert "bf16" in cpuinfo_flags(str(arm))
    assert cpuinfo_flags(str(tmp_path / "missing")) == frozenset()


def test_config_keys_and_validation():
    cfg = get_cfg()
    assert cfg.MODEL.PRECISION == "auto" and cfg.MODEL.CHANNELS_LAST == "auto"
    cfg.merge_from_list(["MODEL.CHANNELS_LAST", "True"])
    assert cfg.MODEL.CHANNELS_LAST is True
    with forced_cpu(**AVX2_ONLY):
        validate_config(cfg)
        cfg.MODEL.PRECISION = "bf16"
        with pytest.raises(ConfigError) as info:
            validate_config(cfg)
    assert str(info.value).startswith("MODEL.PRECISION bf16: bfloat16 is not native here (CPU lacks")
    cfg.MODEL.PRECISION = "half"
    with pytest.raises(ConfigError, match="MODEL.PRECISION 'half' is unknown"):
        validate_config(cfg)
    cfg.MODEL.PRECISION = "auto"
    cfg.MODEL.CHANNELS_LAST = "sometimes"
    with pytest.raises(ConfigError, match="MODEL.CHANNELS_LAST 'sometimes' is unknown"):
        validate_config(cfg)


def test_the_config_decision_is_logged_once(fr_log):
    cfg = get_cfg()
    cfg.MODEL.DEVICE = "cpu"
    cfg.SOLVER.AMP.ENABLED = True
    precision._logged.clear()

    def lines() -> list[str]:
        return [r.getMessage() for r in fr_log.records if r.getMessage().startswith("Precision:")]

    with forced_cpu(**AMX):
        first = precision_of_cfg(cfg)
        logged = lines()
        precision_of_cfg(cfg)
    assert logged and set(logged) == {first.describe()}
    assert lines() == logged  # not again
    assert (
        logged[0]
        == "Precision: bf16 autocast + channels_last (CPU has avx512_bf16/amx_bf16; MODEL.PRECISION auto)"
    )
