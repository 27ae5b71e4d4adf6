"""Reference data taken from upstream FastReID's own backbone modules (see ``data/upstream/``).

This module imports only torch, so ``data/upstream/make_references.py`` can use it with upstream's
package on the path. For every case it records:

- ``<case>.keys.txt``: upstream's state-dict key names, shapes and dtypes;
- ``<case>.out.pt`` (some cases): upstream's eval-mode output for ``reference_input()`` with the
  weights ``deterministic_state_dict(keys)``, sampled at up to ``MAX_SAMPLES`` evenly spaced positions.
"""

from __future__ import annotations

import math
import os
import zlib
from collections import OrderedDict

import torch

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "upstream")
MAX_SAMPLES = 4096

# case -> (MODEL.BACKBONE overrides, reference output stored?)
CASES: dict[str, tuple[dict, bool]] = {
    "resnest_50x_ls1": ({"NAME": "build_resnest_backbone", "DEPTH": "50x", "LAST_STRIDE": 1}, True),
    "resnest_50x_ls2": ({"NAME": "build_resnest_backbone", "DEPTH": "50x", "LAST_STRIDE": 2}, True),
    "resnest_101x": ({"NAME": "build_resnest_backbone", "DEPTH": "101x"}, False),
    "resnest_200x": ({"NAME": "build_resnest_backbone", "DEPTH": "200x"}, False),
    "resnest_269x": ({"NAME": "build_resnest_backbone", "DEPTH": "269x"}, False),
    "resnext_50x": ({"NAME": "build_resnext_backbone", "DEPTH": "50x"}, True),
    "resnext_50x_ibn": ({"NAME": "build_resnext_backbone", "DEPTH": "50x", "WITH_IBN": True}, True),
    "resnext_101x_ibn": ({"NAME": "build_resnext_backbone", "DEPTH": "101x", "WITH_IBN": True}, False),
    "resnext_50x_ibn_nl": ({"NAME": "build_resnext_backbone", "DEPTH": "50x", "WITH_IBN": True,
                            "WITH_NL": True}, True),
    **{f"regnet_{d}": ({"NAME": "build_regnet_backbone", "DEPTH": d}, d in ("200x", "400y", "800y"))
       for d in ("200x", "200y", "400x", "400y", "800x", "800y", "1600x", "1600y", "3200x", "3200y",
                 "4000x", "4000y", "6400x", "6400y")},
    **{f"effnet_{d}": ({"NAME": "build_effnet_backbone", "DEPTH": d}, d == "b0")
       for d in ("b0", "b1", "b2", "b3", "b4", "b5")},
    **{f"mobilenetv2_{d}": ({"NAME": "build_mobilenetv2_backbone", "DEPTH": d}, d in ("1.0x", "0.35x"))
       for d in ("1.0x", "0.75x", "0.5x", "0.35x", "0.25x", "0.1x")},
    **{f"shufflenetv2_{d}": ({"NAME": "build_shufflenetv2_backbone", "DEPTH": d}, d in ("0.5x", "1.5x"))
       for d in ("0.5x", "1.0x", "1.5x", "2.0x")},
    **{f"osnet_{d}": ({"NAME": "build_osnet_backbone", "DEPTH": d}, d == "x0_25")
       for d in ("x1_0", "x0_75", "x0_5", "x0_25")},
    "osnet_ibn_x1_0": ({"NAME": "build_osnet_backbone", "DEPTH": "x1_0", "WITH_IBN": True}, True),
}


def read_keys(case: str) -> OrderedDict[str, tuple[tuple[int, ...], torch.dtype]]:
    """Upstream's ``key -> (shape, dtype)`` for ``case``."""
    keys: OrderedDict[str, tuple[tuple[int, ...], torch.dtype]] = OrderedDict()
    with open(os.path.join(DATA, f"{case}.keys.txt")) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            name, shape, dtype = line.split()
            dims = tuple(int(d) for d in shape.split("x")) if shape != "scalar" else ()
            keys[name] = (dims, getattr(torch, dtype))
    return keys


def write_keys(path: str, state_dict: dict, header: str) -> None:
    with open(path, "w") as f:
        f.write(header)
        for name, value in state_dict.items():
            shape = "x".join(str(d) for d in value.shape) or "scalar"
            f.write(f"{name} {shape} {str(value.dtype).replace('torch.', '')}\n")


def deterministic_tensor(name: str, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """Weights that depend only on the key name and shape, scaled so deep nets stay finite."""
    if not dtype.is_floating_point:
        return torch.zeros(shape, dtype=dtype)
    g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
    leaf = name.rsplit(".", 1)[-1]
    if leaf == "running_var":
        return 0.5 + torch.rand(shape, generator=g)
    if leaf in ("running_mean", "bias"):
        return 0.1 * torch.randn(shape, generator=g)
    if len(shape) >= 2:
        return torch.randn(shape, generator=g) / math.sqrt(math.prod(shape[1:]))
    if name.startswith("NL_"):  # non-local output norms (zero at init upstream): small, or activations overflow
        return 0.01 * torch.rand(shape, generator=g)
    return 0.75 + 0.5 * torch.rand(shape, generator=g)


def deterministic_state_dict(keys: dict) -> OrderedDict[str, torch.Tensor]:
    return OrderedDict((k, deterministic_tensor(k, shape, dtype)) for k, (shape, dtype) in keys.items())


def reference_input() -> torch.Tensor:
    return torch.randn(1, 3, 64, 32, generator=torch.Generator().manual_seed(0))


def sample_positions(numel: int) -> torch.Tensor:
    if numel <= MAX_SAMPLES:
        return torch.arange(numel)
    return torch.linspace(0, numel - 1, MAX_SAMPLES).round().long()


def summarize_output(out: torch.Tensor) -> dict:
    flat = out.detach().reshape(-1).double()
    return {"shape": tuple(out.shape), "values": flat[sample_positions(flat.numel())].float(),
            "sum": float(flat.sum()), "abs_sum": float(flat.abs().sum())}


def read_output(case: str) -> dict:
    return torch.load(os.path.join(DATA, f"{case}.out.pt"), weights_only=True)
