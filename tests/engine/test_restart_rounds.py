"""The process-group keys of a torchrun restart round (fastreid.engine.launch._round_prefix): every
rank of a round gets the same prefix, no two rounds share one, whatever order the ranks come in and
whatever a round before left in the store (asks of ranks that died, answers nobody read). torchrun's
own restart count cannot serve: after a lost node only the failed node's agent counts a restart."""

from __future__ import annotations

import datetime
import socket
import threading

import pytest
import torch.distributed as dist

from fastreid.engine.launch import _round_prefix

TIMEOUT = datetime.timedelta(seconds=30)


@pytest.fixture
def server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    store = dist.TCPStore("127.0.0.1", port, is_master=True, timeout=TIMEOUT, wait_for_workers=False)
    yield store, port
    del store


def _client(port):
    return dist.TCPStore("127.0.0.1", port, is_master=False, timeout=TIMEOUT)


def _round(port, world_size, order, timeout=TIMEOUT):
    """Each rank in its own thread with its own store connection, started in ``order``; the
    prefix each got."""
    prefixes: dict[int, str] = {}
    errors: list[BaseException] = []

    def rank_main(rank):
        try:
            prefixes[rank] = _round_prefix(_client(port), rank, world_size, timeout)
        except BaseException as e:  # handed to the test thread
            errors.append(e)

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in order]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    if errors:
        raise errors[0]
    return prefixes


@pytest.mark.parametrize("order", [(0, 1, 2), (2, 1, 0), (1, 0, 2)])
def test_the_ranks_of_a_round_share_a_prefix_no_other_round_has(server, order):
    store, port = server
    first = _round(port, 3, order)
    assert len(set(first.values())) == 1 and set(first) == {0, 1, 2}
    # what dead ranks leave behind: a slot taken but no nonce written, a nonce never answered
    store.add("fastreid/asks", 1)
    dead = store.add("fastreid/asks", 1) - 1
    store.set(f"fastreid/ask/{dead}", "nonce-of-a-dead-rank")
    second = _round(port, 3, tuple(reversed(order)))
    assert len(set(second.values())) == 1
    assert set(second.values()) != set(first.values())


def test_rank_zero_names_the_ranks_that_never_joined(server):
    _, port = server
    with pytest.raises(RuntimeError, match=r"ranks \[1, 2\] did not join round 1"):
        _round(port, 3, (0,), timeout=datetime.timedelta(seconds=1))


def test_one_process_needs_nobody(server):
    _, port = server
    assert _round(port, 1, (0,)) == {0: "fastreid/round_1/"}
