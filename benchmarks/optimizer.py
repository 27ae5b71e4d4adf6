"""Optimizer step time of torch's three implementations on a ResNet-50's parameters, side by side.

``SOLVER.FUSED auto`` uses torch's fused kernel for parameters on the CPU; this benchmark is the
measurement behind that default. The parameter groups are built as the trainer builds them
(``fastreid.solver.get_default_optimizer_params``: one group per parameter, upstream's rule), with
random gradients; each implementation is stepped alternately (round robin, so all see the same
machine load) and the median step time is printed with the ratio to torch's default.

    python benchmarks/optimizer.py [--threads 1,2] [--rounds 15] [--depth 50]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

IMPLEMENTATIONS = {
    "for-loop (torch's CPU default)": {"foreach": False},
    "foreach (multi-tensor)": {"foreach": True},
    "fused": {"fused": True},
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", default="1,2", help="comma-separated torch thread counts")
    parser.add_argument("--rounds", type=int, default=15, help="timed steps per implementation")
    parser.add_argument("--depth", type=int, default=50, help="torchvision ResNet depth")
    args = parser.parse_args()

    import torch
    import torchvision

    from fastreid.solver import get_default_optimizer_params

    model = getattr(torchvision.models, f"resnet{args.depth}")()
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    n_params = sum(p.numel() for p in model.parameters())
    print(
        f"ResNet-{args.depth}: {n_params / 1e6:.1f} M parameters in {len(list(model.parameters()))} tensors"
    )
    print("| optimizer | threads | implementation | ms / step | vs torch's default |")
    print("|---|---|---|---|---|")
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads)
        for name, extra in (("Adam", {}), ("SGD", {"momentum": 0.9})):
            optimizers = {}
            for impl, kw in IMPLEMENTATIONS.items():
                groups = get_default_optimizer_params(model, base_lr=3.5e-4, weight_decay=5e-4)
                optimizers[impl] = getattr(torch.optim, name)(groups, lr=3.5e-4, **extra, **kw)
                for _ in range(3):  # warm-up: state allocation
                    optimizers[impl].step()
            times: dict[str, list[float]] = {impl: [] for impl in optimizers}
            for _ in range(args.rounds):
                for impl, opt in optimizers.items():
                    t = time.perf_counter()
                    opt.step()
                    times[impl].append(time.perf_counter() - t)
            base = statistics.median(times[next(iter(IMPLEMENTATIONS))])
            for impl, ts in times.items():
                ms = statistics.median(ts)
                print(f"| {name} | {threads} | {impl} | {ms * 1000:.1f} | {ms / base:.2f}x |", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
