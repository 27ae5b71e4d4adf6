"""Evaluation across processes: each rank evaluates its contiguous shard of the test set, rank 0
gathers the features in bounded chunks (``comm.gather_rows``) and computes the metrics, which equal
one process's; every round moves at most the chunk budget, so a test set larger than that budget
is gathered in several rounds without ever being serialised whole. Real processes (gloo)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gloo_ranks import run_ranks

from fastreid.config import get_cfg
from fastreid.evaluation.reid_evaluation import ReidEvaluator

NUM_QUERY, NUM_ITEMS, DIM, BATCH = 24, 121, 16, 10  # 121 items: shards of 61 and 60 rows
CHUNK_BYTES = 7 * DIM * 4  # 7 feature rows per round: 9 rounds for the larger shard


def _test_set():
    rng = np.random.default_rng(11)
    pids = rng.integers(0, 12, NUM_ITEMS)
    camids = rng.integers(0, 3, NUM_ITEMS)
    centres = rng.normal(size=(12, DIM))
    feats = centres[pids] + 0.8 * rng.normal(size=(NUM_ITEMS, DIM))
    return torch.tensor(feats, dtype=torch.float32), torch.tensor(pids), torch.tensor(camids)


def _evaluate(begin: int, end: int) -> dict:
    feats, pids, camids = _test_set()
    evaluator = ReidEvaluator(get_cfg(), NUM_QUERY)
    for start in range(begin, end, BATCH):
        stop = min(start + BATCH, end)
        inputs = {
            "targets": pids[start:stop],
            "camids": camids[start:stop],
            "img_paths": [f"{i:04d}.jpg" for i in range(start, stop)],
        }
        evaluator.process(inputs, feats[start:stop])
    return evaluator.evaluate()


def _rank_main(rank: int, world: int) -> dict:
    import torch.distributed as dist

    from fastreid.utils import comm

    assert (rank, world) == (comm.get_rank(), comm.get_world_size())
    comm.GATHER_CHUNK_BYTES = CHUNK_BYTES
    sent: list[int] = []
    gather = dist.gather

    def counting_gather(tensor, *args, **kwargs):
        sent.append(tensor.numel() * tensor.element_size())
        return gather(tensor, *args, **kwargs)

    dist.gather = counting_gather  # type: ignore[assignment]
    shard = (NUM_ITEMS - 1) // world + 1  # the inference sampler's contiguous shards
    results = _evaluate(min(rank * shard, NUM_ITEMS), min((rank + 1) * shard, NUM_ITEMS))
    everyone = comm.all_gather(dict(results))  # what EvalHook does with the evaluator's results
    return {"results": results, "all": everyone, "sent": sent}


@pytest.mark.slow
def test_two_ranks_gather_in_chunks_and_get_one_process_metrics():
    expected = _evaluate(0, NUM_ITEMS)
    ranks = run_ranks(_rank_main, 2)
    assert ranks[1]["results"] == {}  # upstream's contract: only rank 0 returns the metrics
    got = ranks[0]["results"]
    assert set(got) == set(expected)
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-12), key
    for rank in ranks:  # after EvalHook's all_gather, every rank holds rank 0's metrics
        assert rank["all"][0] == got
    # every round moved CHUNK_BYTES from each rank: 9 rounds of 7 feature rows (61 rows on rank 0),
    # then 2 of 56 ids and 2 of 56 cameras (int64)
    for rank in ranks:
        assert rank["sent"] == [CHUNK_BYTES] * 13, rank["sent"]


def test_gather_rows_in_one_process_is_the_tensor():
    from fastreid.utils import comm

    t = torch.arange(6).reshape(3, 2)
    assert comm.gather_rows(t) is t
