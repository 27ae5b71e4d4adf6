"""Write ``upstream_optim.pt``: parameters after a few steps of upstream FastReID's ``Lamb`` and
``RAdam`` (``fastreid/solver/optim/``, loaded as standalone files) on fixed tensors.

    python tests/solver/data/make_upstream_optim.py /path/to/upstream-fastreid

Each case: a 4x3 float64 parameter from ``torch.Generator().manual_seed(0)`` and gradients
``grad_k = sin(k + p)`` for steps k = 1..5 (a function of the parameter itself, so that every step
depends on the previous one). Not run by the suite."""

from __future__ import annotations

import importlib.util
import os
import sys
import warnings

import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "upstream_optim.pt")
CASES = {
    "lamb": ("lamb.py", "Lamb", {"lr": 0.01, "weight_decay": 0.01}),
    "lamb_adam": ("lamb.py", "Lamb", {"lr": 0.01, "adam": True}),
    "radam": ("radam.py", "RAdam", {"lr": 0.01, "weight_decay": 0.01}),
}


def run(optimizer_cls, kwargs) -> torch.Tensor:
    p = torch.nn.Parameter(torch.randn(4, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64))
    opt = optimizer_cls([p], **kwargs)
    for k in range(1, 8):
        p.grad = torch.sin(k + p.detach())
        opt.step()
    return p.detach().clone()


def main(upstream: str) -> None:
    out = {}
    for name, (file_name, cls_name, kwargs) in CASES.items():
        spec = importlib.util.spec_from_file_location(
            f"up_{file_name}", os.path.join(upstream, "fastreid/solver/optim", file_name)
        )
        module = importlib.util.module_from_spec(spec)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            spec.loader.exec_module(module)
            out[name] = run(getattr(module, cls_name), kwargs)
    torch.save(out, OUT)
    print("written", OUT, {k: float(v.sum()) for k, v in out.items()})


if __name__ == "__main__":
    main(sys.argv[1])
