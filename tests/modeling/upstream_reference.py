"""Reference data taken from upstream FastReID's released code, and the deterministic weights and
inputs both sides are run on (files in ``data/upstream/``).

One generator, ``data/make_upstream_reference.py`` (run by hand against upstream's checkout), wrote
that folder:

- backbones, one case per ``CASES`` entry: ``<case>.keys.txt`` holds upstream's state-dict key
  names, shapes and dtypes (``read_keys``); ``<case>.out.pt`` (some cases) upstream's eval-mode
  output for ``reference_input()`` with the weights ``deterministic_state_dict(keys)``, sampled at
  up to ``MAX_SAMPLES`` evenly spaced positions (``read_output``);
- whole models from upstream configs: ``<name>.json`` holds the key names and shapes, upstream
  commit, config and overrides, ``<name>.pt`` (some models) the eval features, backbone output and
  training losses on ``reference_images`` with the weights ``deterministic_state(keys)`` and
  calibrated norms (``load_reference``).

Both weight functions follow the same rules (``_deterministic_tensor``) and differ only where the
recorded numbers depend on it: how each tensor's generator is seeded (the key's name, or its rank
among the sorted keys) and the values of 1-D norm weights. Changing either means regenerating the
recorded outputs with upstream's code.

Random values come from numpy's ``Generator`` (PCG64), not ``torch.randn``: torch draws normals
with a vectorised kernel on AVX2 CPUs and a scalar one elsewhere, which differ in the last bit, so
weights and images drawn by torch would depend on the CPU (``ATEN_CPU_CAPABILITY=default`` showed
it). Everything is drawn in float64 and rounded once to the tensor's dtype.

This module imports only torch and numpy, so the generator can use it with upstream's package on
the path.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "upstream")
MAX_SAMPLES = 4096
# The recorded outputs are computed in double on both sides (see ``assert_matches_reference``).
REFERENCE_DTYPE = torch.float64
# float64 rounding (1.1e-16) amplified through a deep net: float32 outputs of these models differed
# across CPUs (AVX2, AVX-512, AMD, Intel kernels) by up to 2e-4 of the output's magnitude, i.e.
# ~4e3 x float32's epsilon; the same amplification in double is ~5e-13. 1e-9 of the magnitude leaves
# a margin of ~2000 while a planted one-line fault (a channel, an eps, a stride, a norm) moves the
# outputs by 1e-4 or more of it (``tests/modeling/test_parity_catches_faults.py``).
RELATIVE_TOLERANCE = 1e-9
NUM_CLASSES = 16
BATCH_TARGETS = [0, 0, 1, 1]

# backbone case -> (MODEL.BACKBONE overrides, reference output stored?)
CASES: dict[str, tuple[dict, bool]] = {
    "resnest_50x_ls1": ({"NAME": "build_resnest_backbone", "DEPTH": "50x", "LAST_STRIDE": 1}, True),
    "resnest_50x_ls2": ({"NAME": "build_resnest_backbone", "DEPTH": "50x", "LAST_STRIDE": 2}, True),
    "resnest_101x": ({"NAME": "build_resnest_backbone", "DEPTH": "101x"}, False),
    "resnest_200x": ({"NAME": "build_resnest_backbone", "DEPTH": "200x"}, False),
    "resnest_269x": ({"NAME": "build_resnest_backbone", "DEPTH": "269x"}, False),
    "resnext_50x": ({"NAME": "build_resnext_backbone", "DEPTH": "50x"}, True),
    "resnext_50x_ibn": ({"NAME": "build_resnext_backbone", "DEPTH": "50x", "WITH_IBN": True}, True),
    "resnext_101x_ibn": ({"NAME": "build_resnext_backbone", "DEPTH": "101x", "WITH_IBN": True}, False),
    "resnext_50x_ibn_nl": (
        {"NAME": "build_resnext_backbone", "DEPTH": "50x", "WITH_IBN": True, "WITH_NL": True},
        True,
    ),
    **{
        f"regnet_{d}": ({"NAME": "build_regnet_backbone", "DEPTH": d}, d in ("200x", "400y", "800y"))
        for d in (
            "200x",
            "200y",
            "400x",
            "400y",
            "800x",
            "800y",
            "1600x",
            "1600y",
            "3200x",
            "3200y",
            "4000x",
            "4000y",
            "6400x",
            "6400y",
        )
    },
    **{
        f"effnet_{d}": ({"NAME": "build_effnet_backbone", "DEPTH": d}, d == "b0")
        for d in ("b0", "b1", "b2", "b3", "b4", "b5")
    },
    **{
        f"mobilenetv2_{d}": ({"NAME": "build_mobilenetv2_backbone", "DEPTH": d}, d in ("1.0x", "0.35x"))
        for d in ("1.0x", "0.75x", "0.5x", "0.35x", "0.25x", "0.1x")
    },
    **{
        f"shufflenetv2_{d}": ({"NAME": "build_shufflenetv2_backbone", "DEPTH": d}, d in ("0.5x", "1.5x"))
        for d in ("0.5x", "1.0x", "1.5x", "2.0x")
    },
    **{
        f"osnet_{d}": ({"NAME": "build_osnet_backbone", "DEPTH": d}, d == "x0_25")
        for d in ("x1_0", "x0_75", "x0_5", "x0_25")
    },
    "osnet_ibn_x1_0": ({"NAME": "build_osnet_backbone", "DEPTH": "x1_0", "WITH_IBN": True}, True),
}

# Keys of integer buffers in the model references (their JSON records shapes, not dtypes).
_INTEGER_LEAVES = ("num_batches_tracked", "queue_label", "queue_ptr")

NormWeight = Callable[[str, tuple[int, ...], np.random.Generator], torch.Tensor]


def _normal(g: np.random.Generator, shape: Sequence[int]) -> torch.Tensor:
    return torch.from_numpy(g.standard_normal(tuple(shape)))


def _uniform(g: np.random.Generator, shape: Sequence[int]) -> torch.Tensor:
    return torch.from_numpy(g.random(tuple(shape)))


# ---------------------------------------------------------------------------------------------
# Deterministic weights
# ---------------------------------------------------------------------------------------------


def _deterministic_tensor(
    key: str, shape: tuple[int, ...], dtype: torch.dtype, g: np.random.Generator, norm_weight: NormWeight
) -> torch.Tensor:
    """The value of one state-dict entry, drawn from ``g`` by the rules shared by both references.

    Weights with a fan-in get ``N(0, 1 / fan_in)`` (so deep nets neither vanish nor explode),
    running variances ``U(0.5, 1.5)``, GeM ``p`` 3, integer buffers 0, 1-D weights
    ``norm_weight(...)``, the rest (biases, running means, tokens, queues) ``0.1 N``.
    """
    leaf = key.rsplit(".", 1)[-1]
    if not dtype.is_floating_point:
        return torch.zeros(shape, dtype=dtype)
    # in place on the float64 draw (the same operations in the same order, so the same values as
    # ``0.5 + u`` etc.): a 100M-parameter net's weights without a second copy of each tensor
    if leaf == "running_var":
        value = _uniform(g, shape).add_(0.5)
    elif key.endswith("pool_layer.p"):
        value = torch.full(shape, 3.0)
    elif leaf == "weight" and len(shape) >= 2:
        value = _normal(g, shape).div_(math.sqrt(math.prod(shape[1:])))
    elif leaf == "weight":
        value = norm_weight(key, shape, g)
    else:
        value = _normal(g, shape).mul_(0.1)
    return value.to(dtype)


def _backbone_norm_weight(key: str, shape: tuple[int, ...], g: np.random.Generator) -> torch.Tensor:
    if key.startswith(
        "NL_"
    ):  # non-local output norms (zero at init upstream): small, or activations overflow
        return _uniform(g, shape).mul_(0.01)
    return _uniform(g, shape).mul_(0.5).add_(0.75)


def _model_norm_weight(key: str, shape: tuple[int, ...], g: np.random.Generator) -> torch.Tensor:
    return _normal(g, shape).mul_(0.1).add_(1)


def deterministic_tensor(name: str, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """A backbone reference weight: a function of the key name, shape and dtype only."""
    g = np.random.default_rng(zlib.crc32(name.encode()))
    return _deterministic_tensor(name, tuple(shape), dtype, g, _backbone_norm_weight)


def deterministic_state_dict(
    keys: Mapping[str, tuple[tuple[int, ...], torch.dtype]],
) -> OrderedDict[str, torch.Tensor]:
    """Backbone reference weights for ``key -> (shape, dtype)`` (as ``read_keys`` returns).

    The last key list's tensors are kept and shared with the next call for the same keys (cases
    that differ only in a stride, a fault test rebuilding a case): load them, never modify them.
    """
    return OrderedDict(_shared_state_dict(tuple(keys.items())))


@functools.lru_cache(maxsize=1)
def _shared_state_dict(
    items: tuple[tuple[str, tuple[tuple[int, ...], torch.dtype]], ...],
) -> tuple[tuple[str, torch.Tensor], ...]:
    return tuple((k, deterministic_tensor(k, shape, dtype)) for k, (shape, dtype) in items)


def model_keys(shapes: Mapping[str, Sequence[int]]) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """A model reference's ``key -> shape`` (its JSON) as ``key -> (shape, dtype)``: integer buffers
    are recognised by name, the rest is float32."""
    return {
        key: (tuple(shape), torch.long if key.rsplit(".", 1)[-1] in _INTEGER_LEAVES else torch.float32)
        for key, shape in shapes.items()
    }


def deterministic_state(shapes: Mapping[str, Sequence[int]], seed: int = 0) -> dict[str, torch.Tensor]:
    """Model reference weights for ``key -> shape``: a function of each key's rank in sorted order,
    its name and ``seed`` only (dtypes as ``model_keys`` gives them)."""
    keys = model_keys(shapes)
    state = {}
    for rank, key in enumerate(sorted(keys)):
        g = np.random.default_rng(seed * 100_003 + rank)
        shape, dtype = keys[key]
        state[key] = _deterministic_tensor(key, shape, dtype, g, _model_norm_weight)
    return state


class _SkipRandomDraws(TorchFunctionMode):
    """Random initialisers (``normal_``, ``uniform_``) return their tensor untouched.

    A meta tensor has no values to draw, but torch still runs each draw's shape rules in Python
    (its decompositions): half the time of building a backbone on the meta device. The
    initialisers that check something (kaiming's and xavier's fans, ``constant_``) still run.
    """

    _DRAWS = frozenset(
        {torch.Tensor.normal_, torch.Tensor.uniform_, torch.nn.init.normal_, torch.nn.init.uniform_}
    )

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self._DRAWS:
            tensor = args[0] if args else kwargs.get("tensor", kwargs.get("self"))
            if isinstance(tensor, torch.Tensor) and tensor.is_meta:
                return tensor
        return func(*args, **kwargs)


@contextlib.contextmanager
def on_meta_device() -> Iterator[None]:
    """Build modules on the meta device (shapes and dtypes, no values): for tests that check
    keys, shapes and strict loading only, without initialising 100M-parameter nets."""
    with torch.device("meta"), _SkipRandomDraws():
        yield


def meta_state_dict(
    keys: Mapping[str, tuple[tuple[int, ...], torch.dtype]],
) -> OrderedDict[str, torch.Tensor]:
    """A state dict with upstream's layout ``key -> (shape, dtype)`` and no values (meta tensors).

    Loading it strictly into a model built on the meta device checks what loading the reference
    weights checks (every key present, none extra, every shape equal) without building real
    tensors or drawing ~100M values for the largest nets.
    """
    return OrderedDict(
        (k, torch.empty(shape, dtype=dtype, device="meta")) for k, (shape, dtype) in keys.items()
    )


def calibrate_norms(model: torch.nn.Module, run: Callable[[], object]) -> None:
    """Set every batch norm's running statistics to those of one training-mode pass ``run()``.

    Random running statistics make deep nets forget their input (each norm shrinks or blows up the
    signal), so eval features would hardly depend on the image; calibrated ones keep it.
    """
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    momenta = [m.momentum for m in norms]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # cumulative average: after one pass, the batch statistics
    model.train()
    with torch.no_grad():
        run()
    for m, momentum in zip(norms, momenta):
        m.momentum = momentum


# ---------------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------------


def reference_input() -> torch.Tensor:
    """The backbone references' input: one 64x32 image of standard normal values (float64)."""
    return _normal(np.random.default_rng(0), (1, 3, 64, 32))


def reference_images(height: int, width: int, n: int = 4, seed: int = 2024) -> torch.Tensor:
    """``n`` uint8 images: coarse random blobs (smooth, so deep nets keep them apart) plus noise."""
    g = np.random.default_rng(seed)
    coarse = _uniform(g, (n, 3, max(height // 8, 1), max(width // 8, 1))) * 255
    smooth = torch.nn.functional.interpolate(
        coarse, size=(height, width), mode="bilinear", align_corners=False
    )
    noise = _normal(g, (n, 3, height, width)) * 10
    return (smooth + noise).clamp(0, 255).round().to(torch.uint8)


# ---------------------------------------------------------------------------------------------
# Reading the recorded data
# ---------------------------------------------------------------------------------------------


def _load_tensors(file_name: str) -> dict:
    return torch.load(os.path.join(DATA_DIR, file_name), map_location="cpu", weights_only=True)


def read_keys(case: str) -> OrderedDict[str, tuple[tuple[int, ...], torch.dtype]]:
    """Upstream's backbone ``key -> (shape, dtype)`` for ``case``."""
    keys: OrderedDict[str, tuple[tuple[int, ...], torch.dtype]] = OrderedDict()
    with open(os.path.join(DATA_DIR, f"{case}.keys.txt")) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            name, shape, dtype = line.split()
            dims = tuple(int(d) for d in shape.split("x")) if shape != "scalar" else ()
            keys[name] = (dims, getattr(torch, dtype))
    return keys


def read_output(case: str) -> dict:
    """Upstream's recorded backbone output summary for ``case`` (shape, sampled ``values``, ``sum``,
    ``abs_sum``: ``summarize_output`` in ``data/make_upstream_reference.py``)."""
    return _load_tensors(f"{case}.out.pt")


def load_reference(name: str) -> dict:
    """``{"keys": {key: shape}, "source": ..., "config": ..., "overrides": [...], ...}`` plus, when
    recorded, ``"features"`` and ``"losses"`` (tensors)."""
    with open(os.path.join(DATA_DIR, f"{name}.json")) as f:
        ref = json.load(f)
    if os.path.exists(os.path.join(DATA_DIR, f"{name}.pt")):
        ref.update(_load_tensors(f"{name}.pt"))
    return ref


def assert_matches_reference(got: torch.Tensor, want: torch.Tensor, what: str = "") -> None:
    """``got`` equals the float64 reference ``want`` to ``RELATIVE_TOLERANCE`` of the reference's
    magnitude (its largest absolute value, at least 1), element by element."""
    assert got.dtype == REFERENCE_DTYPE, f"{what}: compared in {got.dtype}, not {REFERENCE_DTYPE}"
    scale = max(float(want.abs().max()), 1.0)
    tol = RELATIVE_TOLERANCE * scale
    torch.testing.assert_close(
        got, want.to(got.dtype), rtol=RELATIVE_TOLERANCE, atol=tol, msg=lambda m: f"{what}: {m}"
    )


def sample_positions(numel: int) -> torch.Tensor:
    """At most ``MAX_SAMPLES`` evenly spaced positions of a flattened output."""
    if numel <= MAX_SAMPLES:
        return torch.arange(numel)
    return torch.linspace(0, numel - 1, MAX_SAMPLES).round().long()
