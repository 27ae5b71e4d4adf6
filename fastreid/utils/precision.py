"""The one decider of the precision a model computes in (``MODEL.PRECISION``), from what the CPU
and the torch build can do.

- ``fp32``: float32 throughout.
- ``bf16``: float32 weights, bfloat16 autocast (convolutions and matrix products in bfloat16;
  losses, softmax and reductions in float32, as torch's autocast lists decide) with the model in
  channels-last memory (oneDNN's bfloat16 convolutions run on NHWC); features come out float32.

On the CPU bfloat16 pays only where the CPU computes it natively: AVX512_BF16 (AMD Zen 4 and
later, Intel Cooper Lake and later), AMX-BF16 (Intel Sapphire Rapids and later) or ARM's BF16
extension (Graviton 3, Neoverse V1/N2, Apple M2 and later). Measured on an AMD EPYC with
AVX512_BF16: ResNet-50 256x128 inference 2.3x faster, a training step 2.4x, the same Rank-1/mAP
(``benchmarks/README.md``, "precision"). Elsewhere oneDNN emulates it and it is slower than
float32.

The rule (``decide``):

- CPU, ``auto`` (the default): ``bf16`` where bfloat16 is native, ``fp32`` where it would be
  emulated, for training and evaluation alike. ``SOLVER.AMP.ENABLED`` (upstream's key, written for
  CUDA's float16) does not change the CPU's choice: on a CPU the hardware answers whether lower
  precision is faster, and the same metrics were measured either way. So AMP on an AVX2 CPU no
  longer emulates bfloat16, and ``auto`` with AMP off still uses native bfloat16.
- CPU, ``bf16``: bfloat16; where it is not native this is a :class:`PrecisionError` naming what
  the CPU lacks (``FASTREID_FORCE_BF16=1`` runs it anyway, for testing).
- ``fp32``: float32 everywhere, also when ``SOLVER.AMP.ENABLED`` is True (said in the log line).
- CUDA (and other accelerators), ``auto``: upstream's behaviour: training under float16 autocast
  with a GradScaler when ``SOLVER.AMP.ENABLED``, evaluation in float32; ``bf16``: bfloat16
  autocast in training and evaluation where the device supports it.

A decision is made from the config by :func:`precision_of_cfg`, logged once with its reason
(``Precision: bf16 autocast + channels_last (CPU has avx512_bf16; MODEL.PRECISION auto)``) and
carried out by the trainer, the evaluation loop and the predictor (:meth:`PrecisionDecision.autocast`,
:attr:`PrecisionDecision.channels_last`). Tests force the CPU's facts with :func:`forced_cpu`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import platform as _stdlib_platform
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import torch

from fastreid.utils.device import device_type_of
from fastreid.utils.errors import UserError
from fastreid.utils.platform import cpu_flags

__all__ = [
    "FORCE_BF16_ENV",
    "PRECISION_CHOICES",
    "CpuFacts",
    "PrecisionDecision",
    "PrecisionError",
    "cpu_facts",
    "decide",
    "describe_cpu",
    "forced_cpu",
    "log_decision",
    "native_bf16",
    "precision_of_cfg",
]

logger = logging.getLogger(__name__)

PRECISION_CHOICES = ("auto", "fp32", "bf16")
#: Set to 1 to treat bfloat16 as native on a CPU that emulates it (testing only: it is slower there).
FORCE_BF16_ENV = "FASTREID_FORCE_BF16"

# CPU features that compute bfloat16 natively, as Linux's /proc/cpuinfo names them.
_X86_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
_ARM_BF16_FLAG = "bf16"
# ONEDNN_MAX_CPU_ISA values at or above oneDNN's first ISA with native bfloat16 (avx512_core_bf16);
# a lower cap makes oneDNN emulate bfloat16 even on a CPU that has it.
_ONEDNN_BF16_ISAS = (
    "ALL",
    "DEFAULT",
    "AVX512_CORE_BF16",
    "AVX512_CORE_FP16",
    "AVX512_CORE_AMX",
    "AVX512_CORE_AMX_FP16",
    "AVX10_1_512",
    "AVX10_1_512_AMX",
    "AVX10_1_512_AMX_FP16",
    "AVX10_2_512",
    "AVX10_2_512_AMX_2",
)


class PrecisionError(UserError, ValueError):
    """``MODEL.PRECISION`` asks for something this machine cannot do well (or at all)."""

    exit_code = 2


@dataclass(frozen=True)
class CpuFacts:
    """What the decision reads about the CPU and the torch build."""

    #: CPU features present that compute bfloat16 natively ("avx512_bf16", "amx_bf16", "bf16" on ARM).
    bf16_features: tuple[str, ...]
    #: Processor architecture ("x86_64", "aarch64", "arm64", ...).
    arch: str
    #: torch's ATen kernel level (``torch.backends.cpu.get_cpu_capability()``: "AVX512", "AVX2", "DEFAULT", ...).
    aten_capability: str
    #: oneDNN is in this torch build and usable (``torch.backends.mkldnn.is_available()``).
    onednn: bool
    #: torch's own check that oneDNN can run bfloat16 here (``torch.ops.mkldnn._is_mkldnn_bf16_supported``;
    #: it also accepts AVX-512 CPUs that only emulate bfloat16, so it is necessary, not sufficient).
    onednn_bf16: bool
    #: ``ONEDNN_MAX_CPU_ISA`` when set: a cap on the instructions oneDNN may use.
    onednn_isa_cap: str | None = None

    @property
    def is_x86(self) -> bool:
        return self.arch.lower() in ("x86_64", "amd64", "i386", "i686", "x86")


_forced: list[dict[str, Any]] = []
_forced_lock = threading.Lock()


@contextlib.contextmanager
def forced_cpu(**facts: Any) -> Iterator[None]:
    """Pretend the CPU has other facts inside the ``with`` block (for tests and reports).

    Keywords are :class:`CpuFacts` fields (``bf16_features=("avx512_bf16",)``, ``arch="x86_64"``,
    ``onednn_bf16=False``, ...); facts not given are the real ones. Blocks nest; the innermost
    value of a fact wins.
    """
    names = {f.name for f in dataclasses.fields(CpuFacts)}
    unknown = sorted(set(facts) - names)
    if unknown:
        raise TypeError(f"forced_cpu: unknown fact(s) {unknown}; use {sorted(names)}")
    if "bf16_features" in facts:
        facts["bf16_features"] = tuple(facts["bf16_features"])
    with _forced_lock:
        _forced.append(facts)
    try:
        yield
    finally:
        with _forced_lock:
            _forced.remove(facts)


def _macos_arm_bf16() -> bool:
    try:
        out = subprocess.run(
            ["sysctl", "-n", "hw.optional.arm.FEAT_BF16"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return out.strip() == "1"


def _torch_x86_bf16_features() -> list[str]:
    """The same features through torch's cpuinfo (works on every OS; absent in old torch)."""
    found = []
    cpu = getattr(torch, "cpu", None)
    check = getattr(cpu, "_is_avx512_bf16_supported", None)
    if callable(check) and check():
        found.append("avx512_bf16")
    check = getattr(cpu, "_is_amx_tile_supported", None)  # every AMX CPU so far has AMX-BF16
    if callable(check) and check():
        found.append("amx_bf16")
    return found


@lru_cache(maxsize=1)
def _real_cpu_facts() -> CpuFacts:
    arch = _stdlib_platform.machine() or "unknown"
    features: list[str] = []
    if sys.platform.startswith("linux"):
        flags = cpu_flags()
        features = [f for f in _X86_BF16_FLAGS if f in flags]
        if _ARM_BF16_FLAG in flags and arch.lower() in ("aarch64", "arm64"):
            features.append(_ARM_BF16_FLAG)
    elif sys.platform == "darwin" and arch.lower() == "arm64" and _macos_arm_bf16():
        features.append(_ARM_BF16_FLAG)
    if not features:
        features = _torch_x86_bf16_features()
    onednn = bool(torch.backends.mkldnn.is_available())
    bf16_check = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    try:
        onednn_bf16 = onednn and bool(bf16_check()) if bf16_check is not None else onednn
    except RuntimeError:  # an op missing from this build
        onednn_bf16 = False
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA")
    return CpuFacts(
        bf16_features=tuple(features),
        arch=arch,
        aten_capability=str(torch.backends.cpu.get_cpu_capability()),
        onednn=onednn,
        onednn_bf16=onednn_bf16,
        onednn_isa_cap=cap.strip().upper() if cap else None,
    )


def cpu_facts() -> CpuFacts:
    """This CPU's facts (read once per process), with any :func:`forced_cpu` facts applied."""
    facts = _real_cpu_facts()
    with _forced_lock:
        overrides: dict[str, Any] = {}
        for forced in _forced:
            overrides.update(forced)
    return dataclasses.replace(facts, **overrides) if overrides else facts


def native_bf16(facts: CpuFacts | None = None) -> tuple[bool, str]:
    """Whether bfloat16 is native on this CPU for this torch build, and the fact that says so
    (what it has, or what it lacks)."""
    facts = facts or cpu_facts()
    if not facts.bf16_features:
        wanted = "ARM BF16 (FEAT_BF16)" if not facts.is_x86 else " and ".join(_X86_BF16_FLAGS)
        return False, f"CPU lacks {wanted}"
    has = "/".join(facts.bf16_features)
    if not facts.onednn:
        return False, f"CPU has {has} but this torch build has no oneDNN"
    if facts.is_x86 and facts.onednn_isa_cap and facts.onednn_isa_cap not in _ONEDNN_BF16_ISAS:
        return False, f"CPU has {has} but ONEDNN_MAX_CPU_ISA={facts.onednn_isa_cap} keeps oneDNN from it"
    if not facts.onednn_bf16:
        return False, f"CPU has {has} but oneDNN cannot run bfloat16 here (torch's _is_mkldnn_bf16_supported)"
    if facts.is_x86 and facts.aten_capability.upper() in ("DEFAULT", "NONE"):
        return False, f"CPU has {has} but torch's kernels are held at ATEN_CPU_CAPABILITY=default"
    return True, f"CPU has {has}"


def _force_env() -> bool:
    return os.environ.get(FORCE_BF16_ENV, "").strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class PrecisionDecision:
    """What to compute in, and why (see the module's docstring for the rule)."""

    device_type: str
    #: Autocast dtype of training steps (None: float32).
    train_dtype: torch.dtype | None
    #: Autocast dtype of evaluation and inference (None: float32).
    eval_dtype: torch.dtype | None
    #: Put the model in channels-last memory.
    channels_last: bool
    reason: str

    @property
    def precision(self) -> str:
        """ "bf16" or "fp32": what evaluation and inference compute in (training may differ on CUDA)."""
        return _name(self.eval_dtype)

    def describe(self) -> str:
        """The log line: what was chosen and why."""
        if self.train_dtype is not None and self.train_dtype != self.eval_dtype:
            what = f"{_name(self.train_dtype)} autocast in training, {_name(self.eval_dtype)} in evaluation"
        elif self.eval_dtype is not None:
            what = f"{_name(self.eval_dtype)} autocast"
        else:
            what = "fp32"
        if self.channels_last:
            what += " + channels_last"
        return f"Precision: {what} ({self.reason})"

    def autocast(self, training: bool) -> contextlib.AbstractContextManager:
        """The autocast context of a training step (``training=True``) or of inference."""
        dtype = self.train_dtype if training else self.eval_dtype
        if dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device_type, dtype=dtype)


def _name(dtype: torch.dtype | None) -> str:
    return {torch.bfloat16: "bf16", torch.float16: "fp16", None: "fp32"}.get(dtype, str(dtype))


def _check_choice(requested: str) -> str:
    value = str(requested).strip().lower()
    if value not in PRECISION_CHOICES:
        raise PrecisionError(
            f"MODEL.PRECISION {requested!r} is unknown; use one of {', '.join(PRECISION_CHOICES)}"
        )
    return value


def _decide_cpu(requested: str, amp: bool, channels_last: bool, facts: CpuFacts) -> PrecisionDecision:
    """``channels_last`` is already resolved ("auto" is True on the CPU)."""
    native, fact = native_bf16(facts)
    key = f"MODEL.PRECISION {requested}"
    amp_note = "; SOLVER.AMP.ENABLED True does not apply" if amp else ""
    if requested == "fp32":
        return PrecisionDecision("cpu", None, None, channels_last, f"{key}{amp_note}")
    if requested == "bf16" and not native:
        if not _force_env():
            raise PrecisionError(
                f"MODEL.PRECISION bf16: bfloat16 is not native here ({fact}), so it would be emulated and "
                f"slower than float32; use MODEL.PRECISION auto or fp32 (or set {FORCE_BF16_ENV}=1 to run it "
                "anyway, for testing)"
            )
        return PrecisionDecision(
            "cpu", torch.bfloat16, torch.bfloat16, channels_last, f"{fact}, forced by {FORCE_BF16_ENV}; {key}"
        )
    if native:
        return PrecisionDecision("cpu", torch.bfloat16, torch.bfloat16, channels_last, f"{fact}; {key}")
    amp_note = (
        "; SOLVER.AMP.ENABLED True not applied: emulated bfloat16 is slower than float32" if amp else ""
    )
    return PrecisionDecision("cpu", None, None, channels_last, f"{fact}; {key}{amp_note}")


def _decide_accelerator(
    requested: str, device_type: str, amp: bool, channels_last: bool
) -> PrecisionDecision:
    key = f"MODEL.PRECISION {requested}"
    if requested == "bf16":
        supported = device_type != "cuda" or torch.cuda.is_bf16_supported()
        if not supported:
            raise PrecisionError(
                "MODEL.PRECISION bf16: this CUDA device has no bfloat16; use MODEL.PRECISION auto "
                "(float16 autocast with SOLVER.AMP.ENABLED True) or fp32"
            )
        return PrecisionDecision(device_type, torch.bfloat16, torch.bfloat16, channels_last, key)
    if requested == "auto" and amp and device_type == "cuda":
        return PrecisionDecision(
            device_type, torch.float16, None, channels_last, f"SOLVER.AMP.ENABLED True; {key}"
        )
    if requested == "auto" and amp:
        return PrecisionDecision(
            device_type, torch.bfloat16, None, channels_last, f"SOLVER.AMP.ENABLED True; {key}"
        )
    note = "; SOLVER.AMP.ENABLED True does not apply" if amp else ""
    return PrecisionDecision(device_type, None, None, channels_last, f"{key}{note}")


def _channels_last(value: bool | str, device_type: str) -> bool:
    if isinstance(value, bool):
        return value
    if str(value).strip().lower() != "auto":
        raise PrecisionError(f"MODEL.CHANNELS_LAST {value!r} is unknown; use auto, True or False")
    return device_type == "cpu"


def decide(
    requested: str = "auto",
    device_type: str = "cpu",
    *,
    amp: bool = False,
    channels_last: bool | str = "auto",
    facts: CpuFacts | None = None,
) -> PrecisionDecision:
    """The precision for ``MODEL.PRECISION`` = ``requested`` on a ``device_type`` ("cpu", "cuda",
    "mps", ...), given ``SOLVER.AMP.ENABLED`` (``amp``) and ``MODEL.CHANNELS_LAST``
    (``channels_last``: "auto" is on for the CPU, off elsewhere). Raises :class:`PrecisionError`
    for an unknown value or an explicit ``bf16`` the machine cannot run natively; ``facts``
    replaces the CPU's own (default :func:`cpu_facts`)."""
    value = _check_choice(requested)
    device_type = str(device_type).split(":")[0]
    memory = _channels_last(channels_last, device_type)
    if device_type == "cpu":
        return _decide_cpu(value, bool(amp), memory, facts or cpu_facts())
    return _decide_accelerator(value, device_type, bool(amp), memory)


def precision_of_cfg(cfg: Any, device_type: str | None = None, *, log: bool = True) -> PrecisionDecision:
    """The decision for a config: ``MODEL.PRECISION``, ``SOLVER.AMP.ENABLED``,
    ``MODEL.CHANNELS_LAST`` on ``device_type`` (default: ``MODEL.DEVICE``'s kind, which callers
    have resolved); logged once per distinct decision unless ``log`` is False."""
    if device_type is None:
        device_type = device_type_of(cfg.MODEL.DEVICE)
    decision = decide(
        cfg.MODEL.get("PRECISION", "auto"),
        device_type,
        amp=bool(cfg.SOLVER.AMP.ENABLED),
        channels_last=cfg.MODEL.get("CHANNELS_LAST", "auto"),
    )
    if log:
        log_decision(decision)
    return decision


_logged: set[str] = set()


def log_decision(decision: PrecisionDecision) -> None:
    """Log ``decision`` (INFO) the first time this process sees it."""
    line = decision.describe()
    if line not in _logged:
        _logged.add(line)
        logging.getLogger("fastreid").info(line)


def describe_cpu() -> str:
    """One line for the environment report: native bfloat16 or not, and the fact behind it."""
    native, fact = native_bf16()
    return f"{'native' if native else 'not native'} ({fact}); ATen {cpu_facts().aten_capability}"
