"""Cost of the per-iteration stop-flag agreement (``comm.all_reduce_flag``) in a 2-process gloo
run, next to the iteration it rides on (the smallest training step of the test suite: ResNet-18,
batch 8 of 64x32 images, on the CPU).

    OMP_NUM_THREADS=1 python benchmarks/stop_flag.py [--calls 2000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _worker(rank: int, port: int, calls: int, result: dict) -> None:
    from fastreid.utils import comm

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    for _ in range(50):
        comm.all_reduce_flag(False)
    start = time.perf_counter()
    for _ in range(calls):
        comm.all_reduce_flag(False)
    per_call = (time.perf_counter() - start) / calls
    if rank == 0:
        result["flag"] = per_call
    dist.destroy_process_group()


def _step_time(iters: int = 5) -> float:
    from torchvision.models import resnet18

    torch.set_num_threads(1)
    model = resnet18(num_classes=10)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 3, 64, 32), torch.randint(0, 10, (8,))
    times = []
    for _ in range(iters + 1):
        start = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - start)
    return sorted(times[1:])[len(times[1:]) // 2]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    from fastreid.engine.launch import _find_free_port

    manager = mp.Manager()
    result = manager.dict()
    mp.start_processes(_worker, nprocs=2, args=(_find_free_port(), args.calls, result), start_method="spawn")
    flag = result["flag"]
    step = _step_time()
    print(f"stop-flag all-reduce, 2 gloo processes: {flag * 1e6:.0f} us per iteration ({args.calls} calls)")
    print(f"smallest training step (ResNet-18, 8 x 3 x 64 x 32, CPU): {step * 1e3:.1f} ms")
    print(f"ratio: {100 * flag / step:.2f}% of that step")


if __name__ == "__main__":
    main()
