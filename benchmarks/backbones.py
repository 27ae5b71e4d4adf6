"""Forward time of our backbones against torchvision's same networks, measured side by side.

For each pair in ``benchmarks/model_specs.py``: both models in eval mode on the same random batch,
timed alternately (ours, torchvision, ours, ...) so machine load hits both alike; the figure is the
best of ``--repeats`` rounds. ``--clock cpu`` (the default) counts this process's CPU seconds, which
on a shared machine are far less disturbed by other processes than wall time; compare like with like
(``--threads 1``: CPU time equals compute time). ``--clock wall`` for wall-clock figures. Prints ms per batch, images/s and ours/torchvision (target <= 1.1).

Usage:  python benchmarks/backbones.py [--batch 32] [--height 256 --width 128] [--repeats 5] [--threads 1]
                                      [--clock cpu|wall]
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

CLOCKS = {"cpu": time.process_time, "wall": time.perf_counter}


def _time_once(model: torch.nn.Module, images: torch.Tensor, clock=time.process_time) -> float:
    start = clock()
    with torch.inference_mode():
        model(images)
    return clock() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--height", type=int, default=256)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu")
    parser.add_argument("--only", default="", help="run the specs whose name starts with this")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    clock = CLOCKS[args.clock]
    images = torch.randn(args.batch, 3, args.height, args.width, generator=torch.Generator().manual_seed(0))
    print(
        f"batch {args.batch} x 3 x {args.height} x {args.width}, eval forward, {args.threads} threads, "
        f"{args.clock} time, best of {args.repeats} alternating rounds, torch {torch.__version__}"
    )
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
        _time_once(ours, images, clock)
        if theirs is not None:
            _time_once(theirs, images, clock)
        ours_t, theirs_t = [], []
        for _ in range(args.repeats):
            ours_t.append(_time_once(ours, images, clock))
            if theirs is not None:
                theirs_t.append(_time_once(theirs, images, clock))
        o = min(ours_t)
        if theirs is None:
            print(f"| {spec.name} | {o * 1e3:.0f} | - | - | {args.batch / o:.1f} | - |")
        else:
            t = min(theirs_t)
            print(
                f"| {spec.name} | {o * 1e3:.0f} | {spec.torchvision_name} | {t * 1e3:.0f} | "
                f"{args.batch / o:.1f} | {o / t:.2f}x |"
            )
        sys.stdout.flush()


if __name__ == "__main__":
    main()
