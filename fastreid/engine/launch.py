"""Start training in one process, or in several with torch.distributed (DDP).

- ``num_gpus_per_machine * num_machines == 1``: ``main_func(*args)`` in this process.
- Otherwise one process per device is spawned on this machine (``torch.multiprocessing``,
  spawn start method), joined into one process group. The backend is NCCL when CUDA is
  available and gloo on the CPU, so ``--num-gpus 2`` on a CPU-only machine trains with two gloo
  processes.
- Under ``torchrun`` (or with ``--dist-url env://`` and the ``RANK`` / ``WORLD_SIZE`` /
  ``LOCAL_RANK`` variables set) the processes already exist: each joins the group, nothing is
  spawned.
"""

from __future__ import annotations

import datetime
import logging
import os
import socket
import time
import uuid
from typing import Any, Callable, Optional

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from fastreid.utils import comm
from fastreid.utils.errors import user_error_from_traceback
from fastreid.utils.resume_hint import recorded
from fastreid.utils.threads import configure_threads

__all__ = ["DEFAULT_TIMEOUT", "default_backend", "launch"]

DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)

logger = logging.getLogger(__name__)


def _find_free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def default_backend() -> str:
    """``nccl`` when CUDA is usable, ``gloo`` otherwise."""
    return "nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo"


def _launched_by_torchrun(dist_url: Optional[str]) -> bool:
    has_env = all(k in os.environ for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))
    if dist_url is not None and dist_url.startswith("env://"):
        if not has_env:
            raise RuntimeError(
                "--dist-url env:// needs RANK, WORLD_SIZE and LOCAL_RANK (and MASTER_ADDR/MASTER_PORT) in "
                "the environment; start with torchrun, e.g. torchrun --nproc_per_node 2 tools/train_net.py ..."
            )
        return True
    return has_env and int(os.environ["WORLD_SIZE"]) > 1 and dist_url in (None, "auto")


def launch(
    main_func: Callable[..., Any],
    num_gpus_per_machine: int,
    num_machines: int = 1,
    machine_rank: int = 0,
    dist_url: Optional[str] = None,
    args: tuple = (),
    timeout: datetime.timedelta = DEFAULT_TIMEOUT,
) -> Any:
    """Run ``main_func(*args)`` in one process or in ``num_gpus_per_machine * num_machines``
    DDP processes. ``dist_url``: ``tcp://host:port``, ``env://`` (torchrun), or ``None`` /
    ``"auto"`` for a free local port (single machine only). Returns ``main_func``'s result in
    a single process (``None`` when processes were spawned)."""
    if _launched_by_torchrun(dist_url):
        local_rank = int(os.environ["LOCAL_RANK"])
        local_size = int(os.environ.get("LOCAL_WORLD_SIZE", num_gpus_per_machine))
        world_size = int(os.environ["WORLD_SIZE"])
        rank = int(os.environ["RANK"])
        return _worker(
            local_rank, main_func, world_size, local_size, rank // local_size, "env://", args, timeout, rank
        )

    if num_gpus_per_machine < 1 or num_machines < 1:
        raise ValueError(
            f"--num-gpus ({num_gpus_per_machine}) and --num-machines ({num_machines}) must be >= 1"
        )
    world_size = num_machines * num_gpus_per_machine
    if world_size == 1:
        return main_func(*args)

    if dist_url in (None, "auto"):
        if num_machines > 1:
            raise ValueError(
                "--dist-url auto only works on one machine; give tcp://<machine 0 address>:<port>"
            )
        dist_url = f"tcp://127.0.0.1:{_find_free_port()}"
    if num_machines > 1 and dist_url.startswith("file://"):
        logger.warning("file:// rendezvous across machines needs a shared file system")
    if torch.cuda.is_available() and torch.cuda.device_count() < num_gpus_per_machine:
        raise ValueError(
            f"--num-gpus {num_gpus_per_machine} but this machine has {torch.cuda.device_count()} CUDA device(s)"
        )
    try:
        # the spawned processes see another command line: they print this one's resume command
        with recorded():
            mp.start_processes(
                _worker,
                nprocs=num_gpus_per_machine,
                args=(
                    main_func,
                    world_size,
                    num_gpus_per_machine,
                    machine_rank,
                    dist_url,
                    args,
                    timeout,
                    None,
                ),
                daemon=False,
                start_method="spawn",
            )
    except mp.ProcessRaisedException as e:  # a user error in a process stays one line (run_tool)
        raise (user_error_from_traceback(str(e)) or e) from None
    return None


def _init_process_group(
    backend: str, dist_url: str, world_size: int, rank: int, timeout: datetime.timedelta
) -> None:
    """``init_process_group``, with the keys of a torchrun restart round kept apart.

    A worker group that torchrun restarts (``--max-restarts``) rendezvouses again through the same
    agent store; the process group's keys of the round before (gloo's listening addresses of the
    dead workers) are still in it, and a new rank that reads one before its owner rewrites it
    connects to a closed port: "connectFullMesh ... Connection refused" (pytorch/pytorch#167288).
    Each round's group gets keys of its own (:func:`_round_prefix`).
    """
    if dist_url != "env://" or os.environ.get("TORCHELASTIC_RESTART_COUNT") is None:
        dist.init_process_group(
            backend=backend, init_method=dist_url, world_size=world_size, rank=rank, timeout=timeout
        )
        return
    store, rank, world_size = next(dist.rendezvous(dist_url, rank, world_size, timeout=timeout))
    store.set_timeout(timeout)
    dist.init_process_group(
        backend=backend,
        store=dist.PrefixStore(_round_prefix(store, rank, world_size, timeout), store),
        world_size=world_size,
        rank=rank,
        timeout=timeout,
    )


def _round_prefix(store: Any, rank: int, world_size: int, timeout: datetime.timedelta) -> str:
    """A key prefix that every rank of this round of a torchrun worker group shares and no earlier
    round used.

    torchrun's restart count is not that: after a lost node only the agent whose worker failed
    counts a restart, the other node's agent restarts its workers with its count unchanged, and
    ranks prefixing by it would never meet. Here rank 0 takes a new round number from the store
    (``add``: never the same twice) and answers each rank that asks under a nonce of its own making
    (fresh by construction, so an answer meant for a dead rank of a round before is never read),
    until every rank has acknowledged under the new round's keys.
    """
    if rank == 0:
        number = store.add("fastreid/rounds", 1)
        _answer_round_requests(store, number, world_size, timeout)
        return f"fastreid/round_{number}/"
    nonce = uuid.uuid4().hex
    slot = store.add("fastreid/asks", 1) - 1
    store.set(f"fastreid/ask/{slot}", nonce)
    number = int(store.get(f"fastreid/round_for/{nonce}"))  # waits up to the store's timeout
    store.set(f"fastreid/round_{number}/joined/{rank}", "1")
    return f"fastreid/round_{number}/"


def _answer_round_requests(store: Any, number: int, world_size: int, timeout: datetime.timedelta) -> None:
    """Rank 0's side of :func:`_round_prefix`: give round ``number`` to every asking nonce (old,
    unanswered asks of dead ranks included: nobody reads those answers) until ranks 1..N-1 have
    joined it. Only non-blocking store calls: a slot taken by a rank that died before writing its
    nonce stays pending and is looked at again."""
    joined = [f"fastreid/round_{number}/joined/{r}" for r in range(1, world_size)]
    pending: list[int] = []
    seen = 0
    deadline = time.monotonic() + timeout.total_seconds()
    while not (store.check(joined) if joined else True):
        asked = store.add("fastreid/asks", 0)
        pending.extend(range(seen, asked))
        seen = asked
        for slot in list(pending):
            key = f"fastreid/ask/{slot}"
            if store.check([key]):
                store.set(f"fastreid/round_for/{store.get(key).decode()}", str(number))
                pending.remove(slot)
        if time.monotonic() > deadline:
            missing = [r for r, key in enumerate(joined, 1) if not store.check([key])]
            raise RuntimeError(
                f"ranks {missing} did not join round {number} of the worker group within {timeout}"
            )
        time.sleep(0.02)


def _worker(
    local_rank: int,
    main_func: Callable[..., Any],
    world_size: int,
    num_gpus_per_machine: int,
    machine_rank: int,
    dist_url: str,
    args: tuple,
    timeout: datetime.timedelta,
    global_rank: Optional[int] = None,
) -> Any:
    backend = default_backend()
    if backend == "nccl":
        torch.cuda.set_device(local_rank)
    else:
        # several CPU processes share the cores; more threads each would only oversubscribe them
        configure_threads(ranks_per_machine=num_gpus_per_machine)
    rank = machine_rank * num_gpus_per_machine + local_rank if global_rank is None else global_rank
    try:
        _init_process_group(backend, dist_url, world_size, rank, timeout)
    except Exception as e:
        raise RuntimeError(
            f"Process group initialisation failed (backend {backend}, url {dist_url}): {e}"
        ) from e

    comm.create_local_process_group(num_gpus_per_machine)
    comm.synchronize()
    try:
        return main_func(*args)
    finally:
        comm.destroy_local_process_group()
        if dist.is_initialized():
            dist.destroy_process_group()
