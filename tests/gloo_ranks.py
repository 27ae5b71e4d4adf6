"""Real processes in one gloo group on 127.0.0.1, forked from the test's process: for the tests of
what crosses ranks (an all-gather's gradients, gathers in chunks, class centres split between
ranks), not of how a run starts its processes.

A forked rank starts with what this process has imported (torch, the package, the test module); a
spawned one imports it all again, ~4.5 s of CPU each on 2 cores and most of such a test's cost. The
start itself is tested where it is the point: ``launch``'s spawned ranks in
tests/engine/test_training_end_to_end.py::test_two_process_gloo_ddp_trains_and_evaluates, torchrun
in tests/engine/test_torchrun.py, spawned loader workers in tests/data.
"""

from __future__ import annotations

import datetime
import multiprocessing
import os
import socket
import tempfile
import time
from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

TIMEOUT_S = 120


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(main: Callable[..., Any], world: int, *args: Any) -> list[Any]:
    """``main(rank, world, *args)`` in ``world`` forked processes of one gloo group; their return
    values, rank by rank (through files: tensors, dicts, lists). A rank that raises fails the call
    with its traceback (torch.multiprocessing's ``ProcessRaisedException``); ranks still running
    after ``TIMEOUT_S`` are killed and the call fails. Where there is no fork (Windows) the ranks
    are spawned: ``main`` is then a module-level function of an importable module."""
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    with tempfile.TemporaryDirectory(prefix="gloo_ranks_") as folder:
        context = mp.start_processes(
            _rank,
            args=(main, world, _free_port(), folder, args),
            nprocs=world,
            join=False,
            start_method=method,
        )
        deadline = time.monotonic() + TIMEOUT_S
        while not context.join(timeout=1):
            if time.monotonic() > deadline:
                for process in context.processes:
                    process.kill()
                raise TimeoutError(f"{world} gloo ranks still running after {TIMEOUT_S} s")
        return [torch.load(os.path.join(folder, f"rank{r}.pt"), weights_only=False) for r in range(world)]


def _rank(rank: int, main: Callable[..., Any], world: int, port: int, folder: str, args: tuple) -> None:
    # one thread, before any parallel region: OpenMP's thread pool does not survive a fork
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=TIMEOUT_S),
    )
    try:
        result = main(rank, world, *args)
        torch.save(result, os.path.join(folder, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()
