"""What safe loading and checksums cost: save and load of a ResNet-50 bagtricks checkpoint
(model + Adam state, as training writes it), measured side by side in one run.

    python benchmarks/checkpoint_io.py [--repeats 3]

Rows: plain ``torch.save`` vs ``Checkpointer.write`` (fsync + rename + SHA-256 sidecar);
``torch.load(weights_only=False)`` (what the old fallback did) vs ``load_torch_file`` (weights-only,
checksum verified).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch

from fastreid.config import get_cfg
from fastreid.modeling import build_model
from fastreid.utils.atomic import atomic_write
from fastreid.utils.checkpoint import Checkpointer
from fastreid.utils.safe_load import load_torch_file


def checkpoint_like_training() -> dict:
    cfg = get_cfg()
    cfg.MODEL.DEVICE = "cpu"
    cfg.MODEL.HEADS.NUM_CLASSES = 751
    cfg.MODEL.HEADS.WITH_BNNECK = True
    model = build_model(cfg, log_summary=False)
    optimizer = torch.optim.Adam(model.parameters(), lr=3.5e-4)
    for p in model.parameters():  # Adam state as after one step, without running one
        optimizer.state[p] = {
            "step": torch.tensor(1.0),
            "exp_avg": torch.zeros_like(p),
            "exp_avg_sq": torch.zeros_like(p),
        }
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "iteration": 1000}


def best_of(repeats: int, fn) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = checkpoint_like_training()
    with tempfile.TemporaryDirectory() as folder:
        plain, bare, ours = (os.path.join(folder, n) for n in ("plain.pth", "bare.pth", "ours.pth"))
        rows = [
            ("torch.save", best_of(args.repeats, lambda: torch.save(data, plain))),
            (
                "atomic write (fsync, rename), no checksum",
                best_of(args.repeats, lambda: atomic_write(bare, lambda f: torch.save(data, f))),
            ),
            (
                "Checkpointer.write (+ SHA-256 sidecar)",
                best_of(args.repeats, lambda: Checkpointer.write(ours, data)),
            ),
        ]
        loads = [
            (
                "torch.load(weights_only=False) (the old fallback)",
                best_of(args.repeats, lambda: torch.load(plain, map_location="cpu", weights_only=False)),
            ),
            (
                "torch.load(weights_only=True)",
                best_of(args.repeats, lambda: torch.load(plain, map_location="cpu", weights_only=True)),
            ),
            (
                "load_torch_file (weights-only + checksum verified)",
                best_of(args.repeats, lambda: load_torch_file(ours)),
            ),
        ]
        size_mb = os.path.getsize(ours) / 2**20
    print(f"ResNet-50 bagtricks checkpoint with Adam state: {size_mb:.0f} MiB, best of {args.repeats}")
    print("| operation | seconds | vs first row of its group |")
    print("|---|---|---|")
    for group in (rows, loads):
        for name, seconds in group:
            print(f"| {name} | {seconds:.3f} | {seconds / group[0][1]:.2f}x |")


if __name__ == "__main__":
    main()
