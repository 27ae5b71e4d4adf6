"""Forward time of our backbones against torchvision's same networks, measured side by side.

For each pair in ``benchmarks/model_specs.py``: both models in eval mode on the same random batch,
timed alternately (ours, torchvision, ours, ...) so machine load hits both alike; the figure is the
best of ``--repeats`` rounds (the least disturbed by other processes on a shared machine). Prints ms per batch, images/s and ours/torchvision (target <= 1.1).

Usage:  python benchmarks/backbones.py [--batch 32] [--height 256 --width 128] [--repeats 5] [--threads 2]
        python benchmarks/backbones.py --only ResNeXt-50   (name prefix)
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for path in (ROOT, os.path.join(ROOT, "benchmarks")):
    if path not in sys.path:
        sys.path.insert(0, path)

from model_specs import BACKBONE_SPECS, build_ours  # noqa: E402


def _time_once(model: torch.nn.Module, images: torch.Tensor) -> float:
    start = time.perf_counter()
    with torch.inference_mode():
        model(images)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--height", type=int, default=256)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", default="", help="run the specs whose name starts with this")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    images = torch.randn(args.batch, 3, args.height, args.width, generator=torch.Generator().manual_seed(0))
    print(f"batch {args.batch} x 3 x {args.height} x {args.width}, eval forward, {args.threads} threads, "
          f"best of {args.repeats} alternating rounds, torch {torch.__version__}")
    print("| backbone | ours ms | torchvision | tv ms | ours img/s | ours / tv |")
    print("|---|---|---|---|---|---|")
    for spec in BACKBONE_SPECS:
        if args.only and not spec.name.startswith(args.only):
            continue
        torch.manual_seed(0)
        ours = build_ours(spec).eval()
        theirs = spec.torchvision().eval() if spec.torchvision else None
        with torch.inference_mode():
            out = ours(images[:2])
            if theirs is not None:
                ref = theirs(images[:2])
                assert out.shape == ref.shape, f"{spec.name}: {tuple(out.shape)} vs {tuple(ref.shape)}"
        _time_once(ours, images)
        if theirs is not None:
            _time_once(theirs, images)
        ours_t, theirs_t = [], []
        for _ in range(args.repeats):
            ours_t.append(_time_once(ours, images))
            if theirs is not None:
                theirs_t.append(_time_once(theirs, images))
        o = min(ours_t)
        if theirs is None:
            print(f"| {spec.name} | {o * 1e3:.0f} | - | - | {args.batch / o:.1f} | - |")
        else:
            t = min(theirs_t)
            print(f"| {spec.name} | {o * 1e3:.0f} | {spec.torchvision_name} | {t * 1e3:.0f} | "
                  f"{args.batch / o:.1f} | {o / t:.2f}x |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
