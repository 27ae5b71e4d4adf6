"""Distributed helpers that also work in a single process without torch.distributed."""

from __future__ import annotations

import functools
from typing import Any, cast

import numpy as np
import torch
import torch.distributed as dist

__all__ = [
    "is_dist_initialized",
    "get_world_size",
    "get_rank",
    "get_local_rank",
    "get_local_size",
    "is_main_process",
    "synchronize",
    "barrier",
    "all_gather",
    "gather",
    "gather_rows",
    "broadcast_buffers",
    "reduce_dict",
    "shared_random_seed",
    "create_local_process_group",
    "destroy_local_process_group",
    "all_reduce_flag",
]

# The group of processes on this machine; only create/destroy_local_process_group change it.
_LOCAL_PROCESS_GROUP: dist.ProcessGroup | None = None


def create_local_process_group(num_per_machine: int) -> None:
    """Create one group per machine (``num_per_machine`` consecutive ranks each) and remember
    this process's group for :func:`get_local_rank` / :func:`get_local_size`. Every rank must
    call it (``new_group`` is collective)."""
    global _LOCAL_PROCESS_GROUP
    world_size = get_world_size()
    if world_size % num_per_machine != 0:
        raise ValueError(
            f"world size {world_size} is not a multiple of {num_per_machine} processes per machine"
        )
    machine = get_rank() // num_per_machine
    for i in range(world_size // num_per_machine):
        group = dist.new_group(list(range(i * num_per_machine, (i + 1) * num_per_machine)))
        if i == machine:
            # this rank belongs to its own machine's group, so new_group gave a real group
            _LOCAL_PROCESS_GROUP = cast("dist.ProcessGroup", group)


def destroy_local_process_group() -> None:
    """Forget the local group (the process group itself goes with ``destroy_process_group``)."""
    global _LOCAL_PROCESS_GROUP
    _LOCAL_PROCESS_GROUP = None


def is_dist_initialized() -> bool:
    return dist.is_available() and dist.is_initialized()


def get_world_size() -> int:
    return dist.get_world_size() if is_dist_initialized() else 1


def get_rank() -> int:
    return dist.get_rank() if is_dist_initialized() else 0


def get_local_rank() -> int:
    if not is_dist_initialized() or _LOCAL_PROCESS_GROUP is None:
        return 0
    return dist.get_rank(group=_LOCAL_PROCESS_GROUP)


def get_local_size() -> int:
    if not is_dist_initialized() or _LOCAL_PROCESS_GROUP is None:
        return 1
    return dist.get_world_size(group=_LOCAL_PROCESS_GROUP)


def is_main_process() -> bool:
    return get_rank() == 0


def synchronize() -> None:
    """Barrier across all processes; a no-op in a single process."""
    if get_world_size() == 1:
        return
    if dist.get_backend() == dist.Backend.NCCL and torch.cuda.is_available():
        dist.barrier(device_ids=[torch.cuda.current_device()])
    else:
        dist.barrier()


def barrier() -> None:
    """Wait for every process (``synchronize`` under its torch.distributed name)."""
    synchronize()


@functools.lru_cache
def _object_group():
    """A gloo group for python objects (NCCL cannot move arbitrary pickles)."""
    if dist.get_backend() == "nccl":
        return dist.new_group(backend="gloo")
    return dist.group.WORLD


def all_gather(data: Any, group=None) -> list:
    """Gather any picklable object from every rank; every rank gets the list (rank order)."""
    if get_world_size() == 1:
        return [data]
    group = group or _object_group()
    size = dist.get_world_size(group)
    if size == 1:
        return [data]
    output: list = [None] * size
    dist.all_gather_object(output, data, group=group)
    return output


def gather(data: Any, dst: int = 0, group=None) -> list:
    """Gather any picklable object on rank ``dst``; other ranks get an empty list."""
    if get_world_size() == 1:
        return [data]
    group = group or _object_group()
    if dist.get_world_size(group) == 1:
        return [data]
    if dist.get_rank(group) == dst:
        output: list = [None] * dist.get_world_size(group)
        dist.gather_object(data, output, dst=dst, group=group)
        return output
    dist.gather_object(data, None, dst=dst, group=group)
    return []


#: Bytes a rank sends per round of :func:`gather_rows` (rows of one chunk).
GATHER_CHUNK_BYTES = 64 * 2**20


def gather_rows(tensor: torch.Tensor, dst: int = 0, chunk_bytes: int = 0) -> torch.Tensor | None:
    """Concatenate every rank's CPU ``tensor`` along its first dimension, in rank order, on rank
    ``dst`` (other ranks get None); ranks may hold different numbers of rows.

    The rows travel in rounds of at most ``chunk_bytes`` per rank (default
    :data:`GATHER_CHUNK_BYTES`), each round one ``gather`` of equally shaped tensors, so no rank ever
    holds a serialised copy of its whole share and ``dst`` holds only the result and one round's
    buffers, unlike pickling everything at once (``gather``), which needs several copies of the whole
    test set's features at the same time on ``dst``."""
    if get_world_size() == 1:
        return tensor
    group = _object_group()
    tensor = tensor.detach().cpu().contiguous()
    shapes = all_gather((tuple(tensor.shape), str(tensor.dtype)), group=group)
    counts = [shape[0] if shape else 0 for shape, _ in shapes]
    kinds = {(shape[1:], dtype) for (shape, dtype), n in zip(shapes, counts) if n > 0}
    if len(kinds) > 1:
        raise ValueError(f"gather_rows: ranks hold tensors of different row shapes or dtypes: {shapes}")
    if not kinds:  # no rank has a row
        return tensor if dist.get_rank(group) == dst else None
    row_shape, dtype = kinds.pop()
    if tensor.shape[0] == 0 or tensor.dim() == 0:  # a rank without rows sends rows of the others' kind
        tensor = torch.empty((0, *row_shape), dtype=getattr(torch, dtype.rsplit(".", 1)[-1]))
    row_bytes = max(1, tensor.element_size() * int(torch.Size(tensor.shape[1:]).numel()))
    rows = max(1, int(chunk_bytes or GATHER_CHUNK_BYTES) // row_bytes)
    rank = dist.get_rank(group)
    parts = [tensor.new_empty((n, *tensor.shape[1:])) for n in counts] if rank == dst else []
    send = tensor.new_zeros((rows, *tensor.shape[1:]))
    for start in range(0, max(counts), rows):
        piece = tensor[start : start + rows]
        send[: len(piece)] = piece
        received = [torch.empty_like(send) for _ in counts] if rank == dst else None
        dist.gather(send, received, dst=dst, group=group)
        if received is not None:
            for part, got, n in zip(parts, received, counts):
                take = max(0, min(rows, n - start))
                part[start : start + take] = got[:take]
    return torch.cat(parts) if rank == dst else None


def broadcast_buffers(module: torch.nn.Module, src: int = 0) -> None:
    """Give every rank ``src``'s buffers of ``module`` (BatchNorm running statistics).

    DDP runs with ``broadcast_buffers=False`` (as upstream), so each rank's running statistics
    follow its own batches, and a resumed run's ranks start again from rank 0's (the checkpoint
    holds rank 0's). Training never reads them; evaluation does. Before an evaluation every rank
    takes rank 0's, so each rank's share of the test set is computed by the model the checkpoint
    holds, and the metrics do not depend on how the run was interrupted."""
    if get_world_size() < 2:
        return
    with torch.no_grad():
        for buffer in module.buffers():
            dist.broadcast(buffer, src=src)


def reduce_dict(input_dict: dict, average: bool = True) -> dict:
    """Sum (or average) a dict of scalar tensors across ranks; the result is on every rank."""
    world_size = get_world_size()
    if world_size < 2:
        return input_dict
    with torch.no_grad():
        names = sorted(input_dict.keys())
        values = torch.stack([input_dict[k].detach().float() for k in names])
        dist.all_reduce(values)
        if average:
            values /= world_size
        return dict(zip(names, values))


def all_reduce_flag(flag: bool) -> bool:
    """True on every rank when ``flag`` is true on any rank (one small all-reduce; free in a
    single process)."""
    if get_world_size() < 2:
        return bool(flag)
    device = (
        torch.device("cuda", torch.cuda.current_device())
        if dist.get_backend() == "nccl"
        else torch.device("cpu")
    )
    value = torch.tensor([1 if flag else 0], dtype=torch.int32, device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


def shared_random_seed() -> int:
    """A random seed that is the same on every rank (rank 0's draw)."""
    ints = np.random.randint(2**31)
    return all_gather(int(ints))[0]
