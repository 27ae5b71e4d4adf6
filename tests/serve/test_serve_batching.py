"""Dynamic batching (fastreid.serve.batching.BatchRunner): what queued up while a batch ran goes
into the next one, up to its size; announced items are waited for, abandoned ones are not; an
error reaches every caller of its batch only. And a batch of queries gets the answers each query
gets alone."""

from __future__ import annotations

import threading

import pytest
from serve_testing import assert_same_answers, skip_without_serve_extra

from fastreid.serve import decode_upload
from fastreid.serve.batching import BatchRunner

skip_without_serve_extra()


class Recorder:
    """``run`` for a BatchRunner: doubles its items, records each batch, and holds the first batch
    until ``release`` is set (so that the next items queue up meanwhile)."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self, items: list[int]) -> list[int]:
        self.batches.append(list(items))
        self.started.set()
        assert self.release.wait(30)
        if any(i < 0 for i in items):
            raise ValueError(f"negative item in {items}")
        return [2 * i for i in items]


def test_what_queues_while_a_batch_runs_is_the_next_batch_up_to_its_size():
    run = Recorder()
    runner = BatchRunner(run, max_batch=4, max_wait=0)
    first = runner.submit(100)
    assert run.started.wait(30)
    futures = [runner.submit(i) for i in range(10)]  # queued while the first batch is held
    run.release.set()
    assert first.result(30) == 200
    assert [f.result(30) for f in futures] == [2 * i for i in range(10)]
    assert run.batches == [[100], [0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert list(runner.batch_sizes) == [1, 4, 4, 2]
    runner.close()
    with pytest.raises(RuntimeError, match="closed"):
        runner.submit(1)


def test_one_item_per_call_when_batching_is_off():
    run = Recorder()
    run.release.set()
    runner = BatchRunner(run, max_batch=1)
    futures = [runner.submit(i) for i in range(5)]
    assert [f.result(30) for f in futures] == [0, 2, 4, 6, 8]
    assert all(len(b) == 1 for b in run.batches)
    runner.close()


def test_a_batch_waits_for_announced_items_not_for_abandoned_ones():
    run = Recorder()
    run.release.set()
    runner = BatchRunner(run, max_batch=8, max_wait=60)  # a wait that would fail the test if taken
    with runner.announce() as a, runner.announce() as b, runner.announce():
        fa = a.submit(1)
        fb = b.submit(2)
        # the third is abandoned (its upload failed to decode) at the end of the block
    assert fa.result(30) == 2 and fb.result(30) == 4
    assert run.batches == [[1, 2]]
    runner.close()


def test_an_error_reaches_the_callers_of_its_batch_only():
    run = Recorder()
    runner = BatchRunner(run, max_batch=2, max_wait=0)
    held = runner.submit(1)
    assert run.started.wait(30)
    bad, also_bad, fine = runner.submit(-1), runner.submit(3), runner.submit(4)
    run.release.set()
    assert held.result(30) == 2
    for future in (bad, also_bad):
        with pytest.raises(ValueError, match="negative item"):
            future.result(30)
    assert fine.result(30) == 8  # the worker goes on
    runner.close()


def test_a_batch_of_queries_gets_the_answers_each_gets_alone(gallery, gallery_dir):
    import torch

    images = [decode_upload(p.read_bytes()) for p in sorted(gallery_dir.iterdir())[:6]]
    alone = [gallery.search(image, 5) for image in images]
    batch = torch.cat([gallery.preprocess(image) for image in images])
    together = gallery.search_batch(batch, [5, 5, 3, 5, 1, 5])
    for one, many, k in zip(alone, together, [5, 5, 3, 5, 1, 5]):
        assert_same_answers(many, one[:k])
        assert many[0]["name"] == one[0]["name"] and many[0]["distance"] < 1e-4  # itself first
