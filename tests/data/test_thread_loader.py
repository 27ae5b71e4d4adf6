"""Thread workers: order, bounded work in flight, errors naming the sample, clean shutdown."""

from __future__ import annotations

import gc
import threading
import time

import pytest
import torch
from torch.utils.data import BatchSampler, SequentialSampler, default_collate

from fastreid.data.data_utils import DataLoaderX
from fastreid.data.loading.errors import SampleLoadError
from fastreid.data.loading.threads import THREAD_NAME_PREFIX, ThreadLoaderIter


class _Counting:
    """Samples take a little while (releasing the GIL, like image decoding); calls are counted."""

    def __init__(self, n: int = 40, delay: float = 0.002):
        self.n, self.delay = n, delay
        self.calls = 0
        self.active = 0
        self.max_active = 0
        self.lock = threading.Lock()
        self.img_items = [(f"/data/{i:04d}.jpg", 0, 0) for i in range(n)]

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        with self.lock:
            self.calls += 1
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        time.sleep(self.delay * (1 + (i % 3)))  # uneven: later samples may finish first
        with self.lock:
            self.active -= 1
        if i == getattr(self, "bad", -1):
            raise OSError(f"cannot read {self.img_items[i][0]}")
        return torch.tensor([i])


def _alive() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(THREAD_NAME_PREFIX) and t.is_alive()]


def _batches(n: int, size: int) -> BatchSampler:
    return BatchSampler(SequentialSampler(range(n)), size, False)


def test_batches_in_order_and_threads_used():
    ds = _Counting()
    it = ThreadLoaderIter(ds, _batches(40, 6), default_collate, num_threads=3)
    out = [b.flatten().tolist() for b in it]
    assert out == [list(range(s, min(s + 6, 40))) for s in range(0, 40, 6)]
    assert ds.max_active > 1  # really concurrent
    assert not _alive()  # exhausted: threads joined


def test_bounded_batches_in_flight():
    ds = _Counting(n=400, delay=0.0)
    it = ThreadLoaderIter(ds, _batches(400, 4), default_collate, num_threads=2, max_batches_in_flight=3)
    next(it)
    time.sleep(0.05)
    assert ds.calls <= 4 * 4  # the batch returned + 3 in flight, never the whole epoch
    it.close()
    assert not _alive()


def test_error_names_sample_and_stops_threads():
    ds = _Counting()
    ds.bad = 13
    it = ThreadLoaderIter(ds, _batches(40, 5), default_collate, num_threads=2)
    with pytest.raises(SampleLoadError) as info:
        list(it)
    assert (
        "index 13" in str(info.value) and "/data/0013.jpg" in str(info.value) and "OSError" in str(info.value)
    )
    assert info.value.indices == [13] and info.value.batch == 2
    assert isinstance(info.value.__cause__, OSError)
    assert not _alive()


@pytest.mark.parametrize("background", [False, True])
def test_no_thread_left_after_break_or_gc(background):
    # threads alive before the test (another test's session server in this worker) are not the loader's
    before = frozenset(threading.enumerate())

    def ours() -> list[str]:
        return [t.name for t in threading.enumerate() if t.name.startswith("fastreid-") and t not in before]

    loader = DataLoaderX(_Counting(n=200), batch_size=4, num_threads=2, background=background)
    for i, _ in enumerate(loader):
        if i == 1:
            break
    deadline = time.monotonic() + 5
    while (_alive() or ours()) and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.02)
    assert not ours()


def test_dataloaderx_threads_match_zero_workers_and_pin_flag():
    ds = _Counting(n=23, delay=0.0)
    plain = [b.tolist() for b in DataLoaderX(ds, batch_size=4, shuffle=True, seed=9)]
    threaded = [b.tolist() for b in DataLoaderX(ds, batch_size=4, shuffle=True, seed=9, num_threads=3)]
    assert plain == threaded and len(plain) == 6
    with pytest.raises(ValueError, match="not both"):
        DataLoaderX(ds, batch_size=4, num_workers=2, num_threads=2)


class _GradMode:
    img_items = [("/data/0.jpg", 0, 0)] * 4

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int):
        return torch.tensor([torch.is_grad_enabled()])


@pytest.mark.parametrize("mode", [{"num_threads": 2}, {"timeout": 30}])
def test_loading_threads_take_over_the_grad_mode(mode):
    loader = DataLoaderX(_GradMode(), batch_size=2, **mode)
    with torch.no_grad():
        inside = [bool(v) for b in loader for v in b]
    assert inside == [False] * 4
    assert [bool(v) for b in loader for v in b] == [True] * 4
