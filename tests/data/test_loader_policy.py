"""The loader policy under forced platform facts, the worker-state probe, the __main__ guard check,
worker errors and deaths."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import torch
from keyed_dataset_for_tests import DyingDataset, FailingDataset, KeyedAugDataset, SlowDataset

from fastreid.config import get_cfg
from fastreid.data.data_utils import DataLoaderX
from fastreid.data.loading.errors import SampleLoadError
from fastreid.data.loading.factories import build_dataloader, create_dataloader
from fastreid.data.loading.probe import find_worker_state_problems
from fastreid.data.loading.report import print_dataloader_config
from fastreid.data.loading.request import LoaderRequest
from fastreid.data.loading.rules import decide as policy_decide
from fastreid.utils.platform import forced_platform

REPO = Path(__file__).resolve().parents[2]


def decide(os_name="linux", rocm=False, cuda=False, device="cpu", dataset=None, **request):
    with forced_platform(os_name, rocm=rocm, cuda=cuda, cpu_count=8):
        return policy_decide(
            LoaderRequest(**request), dataset if dataset is not None else KeyedAugDataset(), device=device
        )


# --------------------------------------------------------------------------------------------- rules
def test_windows_safe_uses_no_processes_and_says_why():
    d = decide("windows", num_workers=4)
    assert (d.num_workers, d.num_threads, d.mp_context) == (0, 0, None)
    assert any("WINDOWS_SAFE" in r and "NUM_THREADS" in r for r in d.reasons)
    kwargs = d.dataloader_kwargs()
    assert "prefetch_factor" not in kwargs and "persistent_workers" not in kwargs
    assert "multiprocessing_context" not in kwargs


def test_windows_safe_with_threads():
    d = decide("windows", num_workers=4, num_threads=3)
    assert (d.num_workers, d.num_threads) == (0, 3)
    assert d.dataloader_kwargs()["num_threads"] == 3


def test_windows_unsafe_gives_persistent_spawn_workers():
    d = decide("windows", num_workers=2, windows_safe=False)
    assert (d.num_workers, d.mp_context, d.persistent_workers, d.prefetch_factor) == (2, "spawn", True, 2)


def test_windows_fork_request_becomes_spawn():
    d = decide("windows", num_workers=2, windows_safe=False, mp_context="fork")
    assert d.mp_context == "spawn" and any("not available" in w for w in d.warnings)


@pytest.mark.parametrize(("os_name", "rocm"), [("linux", True), ("macos", False)])
def test_rocm_and_macos_use_spawn(os_name, rocm):
    d = decide(os_name, rocm=rocm, num_workers=2)
    assert (d.num_workers, d.mp_context, d.persistent_workers) == (2, "spawn", True)


def test_linux_uses_fork_without_persistence_by_default():
    d = decide("linux", num_workers=4, num_threads=2)
    assert (d.num_workers, d.num_threads, d.mp_context, d.persistent_workers) == (4, 0, "fork", False)
    assert any("NUM_THREADS not used" in r for r in d.reasons)
    assert d.dataloader_kwargs()["prefetch_factor"] == 2


def test_explicit_choices_are_honoured():
    d = decide("linux", num_workers=2, mp_context="forkserver", persistent_workers=False, prefetch_factor=4)
    assert (d.mp_context, d.persistent_workers, d.prefetch_factor) == ("forkserver", False, 4)


def test_cpu_only_no_pin_memory_no_background():
    d = decide("linux", num_workers=0, pin_memory=True, background="auto")
    assert (d.pin_memory, d.background) == (False, False)
    assert any("pin memory off" in r for r in d.reasons)


def test_cuda_device_without_cuda_is_not_a_crash():
    d = decide("linux", cuda=False, device="cuda", num_workers=0)
    assert not d.pin_memory and not d.background
    assert any("CUDA is not available" in w for w in d.warnings)


def test_cuda_device_pins_and_backgrounds_zero_workers():
    d = decide("linux", cuda=True, device="cuda:0", num_workers=0)
    assert (d.pin_memory, d.background) == (True, True)
    d = decide("linux", cuda=True, device="cuda:0", num_workers=2)
    assert (d.pin_memory, d.background) == (True, False)
    d = decide("windows", cuda=True, device="cuda:0", num_workers=2, num_threads=2)
    assert (d.num_threads, d.background) == (2, False)


def test_persistent_only_with_processes():
    d = decide("linux", num_workers=0, persistent_workers=True)
    assert not d.persistent_workers and d.prefetch_factor is None


@pytest.mark.parametrize(
    ("field", "value", "key"),
    [
        ("mp_context", "threads", "DATALOADER.MP_CONTEXT"),
        ("pin_memory", "maybe", "DATALOADER.PIN_MEMORY"),
        ("num_workers", -1, "DATALOADER.NUM_WORKERS"),
        ("timeout", -5, "DATALOADER.TIMEOUT"),
    ],
)
def test_bad_requests_name_the_key(field, value, key):
    with pytest.raises(ValueError, match=key):
        LoaderRequest(**{field: value})


def test_request_from_cfg_and_table():
    cfg = get_cfg()
    cfg.DATALOADER.NUM_WORKERS = 3
    cfg.DATALOADER.PIN_MEMORY = "False"
    request = LoaderRequest.from_cfg(cfg)
    assert (request.num_workers, request.pin_memory, request.background) == (3, False, "auto")
    with forced_platform("windows"):
        d = policy_decide(request, KeyedAugDataset())
    text = print_dataloader_config(d, file=open(os.devnull, "w"))  # noqa: SIM115
    assert "worker processes" in text and "WINDOWS_SAFE" in text


# --------------------------------------------------------------------------------------------- probe
class _HoldsModel(KeyedAugDataset):
    def __init__(self):
        super().__init__()
        self.sr_model = torch.nn.Linear(2, 2, device="meta")  # meta stands in for cuda here


class _HoldsTensorDeep(KeyedAugDataset):
    def __init__(self):
        super().__init__()
        self.cache = {"feats": [torch.zeros(2), torch.empty(3, device="meta")]}


class _HoldsLock(KeyedAugDataset):
    def __init__(self):
        super().__init__()
        self.lock = threading.Lock()


class _HoldsBigTensor(KeyedAugDataset):
    def __init__(self):
        super().__init__()
        self.table = torch.zeros(1000)
        self.mp_lock = multiprocessing.get_context("spawn").Lock()


def test_probe_names_non_cpu_module_and_falls_back_to_threads():
    d = decide("linux", num_workers=2, dataset=_HoldsModel())
    assert (d.num_workers, d.num_threads, d.mp_context) == (0, 2, None)
    assert any("dataset.sr_model: module on meta" in w for w in d.warnings)


def test_probe_finds_nested_tensor():
    assert find_worker_state_problems(_HoldsTensorDeep(), check_pickle=False) == [
        "dataset.cache['feats'][1]: tensor on meta"
    ]


def test_probe_unpicklable_only_matters_for_spawn():
    d = decide("linux", num_workers=2, mp_context="spawn", num_threads=1, dataset=_HoldsLock())
    assert (d.num_workers, d.num_threads) == (0, 1)
    assert any("dataset.lock: cannot be pickled" in w for w in d.warnings)
    assert decide("linux", num_workers=2, dataset=_HoldsLock()).num_workers == 2  # fork does not pickle
    problems = find_worker_state_problems(KeyedAugDataset(), collate_fn=lambda b: b, check_pickle=True)
    assert len(problems) == 1 and problems[0].startswith("collate_fn: cannot be pickled")


def test_probe_accepts_spawn_safe_state_without_side_effects():
    ds = _HoldsBigTensor()
    assert find_worker_state_problems(ds, check_pickle=True) == []
    assert not ds.table.is_shared()  # the probe did not move the tensor to shared memory


def test_dataset_with_model_trains_with_threads():
    loader = create_dataloader(_HoldsModel(), batch_size=4, shuffle=True, num_workers=2, seed=0)
    assert loader.num_workers == 0 and loader.num_threads == 2
    assert sum(len(b["index"]) for b in loader) == 24


# --------------------------------------------------------------------------------------------- guard
UNGUARDED = """
import sys
sys.path.insert(0, {tests!r})
from keyed_dataset_for_tests import KeyedAugDataset
from fastreid.data.data_utils import DataLoaderX
from fastreid.data.loading.factories import create_dataloader

loader = create_dataloader(KeyedAugDataset(), batch_size=4, shuffle=False, num_workers=2, seed=0,
                           mp_context="spawn")
print("DECISION", loader.num_workers, loader.num_threads, flush=True)
print("BATCHES", sum(1 for _ in loader), flush=True)
direct = DataLoaderX(KeyedAugDataset(), batch_size=4, num_workers=2, multiprocessing_context="spawn")
try:
    next(iter(direct))
except RuntimeError as exc:
    print("REFUSED", exc, flush=True)
"""

GUARDED = """
import sys
sys.path.insert(0, {tests!r})
from keyed_dataset_for_tests import KeyedAugDataset
from fastreid.data.loading.factories import create_dataloader


def main():
    loader = create_dataloader(KeyedAugDataset(), batch_size=4, shuffle=False, num_workers=2, seed=0,
                               mp_context="spawn")
    print("DECISION", loader.num_workers, loader.num_threads, loader.decision.mp_context, flush=True)


if __name__ == "__main__":
    main()
"""


@pytest.mark.slow
@pytest.mark.parametrize("guarded", [False, True])
def test_main_guard_detection_in_a_real_script(tmp_path, guarded):
    script = tmp_path / "train_script.py"
    source = (GUARDED if guarded else UNGUARDED).format(tests=str(Path(__file__).parent))
    script.write_text(textwrap.dedent(source))
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "Traceback" not in out
    if guarded:
        assert "DECISION 2 0 spawn" in out
        assert "guard" not in out
    else:
        assert "DECISION 0 2" in out and "BATCHES 6" in out
        assert f"{script}, line 8" in out  # the create_dataloader(...) call
        assert 'if __name__ == "__main__":' in out and "Using 2 thread workers" in out
        assert "REFUSED" in out and "line 14" in out


# --------------------------------------------------------------------------------------------- errors
@pytest.mark.parametrize(
    "mode", [{}, {"num_threads": 2}, {"num_workers": 2, "multiprocessing_context": "fork"}]
)
def test_sample_exception_names_index_and_file(mode):
    loader = DataLoaderX(FailingDataset(bad_index=7), batch_size=5, timeout=30, **mode)
    with pytest.raises(SampleLoadError) as info:
        list(loader)
    message = str(info.value)
    assert "index 7" in message and "/fake/0007_c1s1_000000_00.jpg" in message and "batch 1" in message
    assert info.value.indices[0] == 7 and info.value.batch == 1


@pytest.mark.parametrize("how", ["kill", "exit"])
def test_dead_worker_ends_iteration_with_the_batch_named(how):
    loader = DataLoaderX(
        DyingDataset(bad_index=7, how=how),
        batch_size=5,
        num_workers=2,
        multiprocessing_context="fork",
        timeout=30,
    )
    with pytest.raises(SampleLoadError) as info:
        list(loader)
    message = str(info.value)
    assert "died" in message and "batch 1" in message and "/fake/0007_c1s1_000000_00.jpg" in message
    assert ("SIGKILL" in message) if how == "kill" else ("code 3" in message)
    assert 7 in info.value.indices


@pytest.mark.parametrize("mode", [{"num_threads": 2}, {"num_workers": 1, "multiprocessing_context": "fork"}])
def test_timeout_ends_iteration(mode):
    loader = DataLoaderX(SlowDataset(slow_index=2, delay=1.0), batch_size=4, timeout=0.2, **mode)
    with pytest.raises(SampleLoadError, match="TIMEOUT"):
        list(loader)


def test_persistent_loader_recovers_after_an_error():
    loader = DataLoaderX(
        FailingDataset(bad_index=7),
        batch_size=5,
        num_workers=1,
        multiprocessing_context="fork",
        persistent_workers=True,
        timeout=30,
    )
    for _ in range(2):  # the broken persistent iterator is replaced, not reset (which would hang)
        with pytest.raises(SampleLoadError, match="index 7"):
            list(loader)
    loader.shutdown()


# --------------------------------------------------------------------------------------------- seeds
class _SeedReport(KeyedAugDataset):
    def __getitem__(self, item):
        import random

        import numpy as np

        info = torch.utils.data.get_worker_info()
        return {
            "worker": info.id if info else -1,
            "torch": torch.initial_seed(),
            "python": random.random(),
            "numpy": float(np.random.rand()),
            "threads": torch.get_num_threads(),
        }


def test_worker_processes_seeded_and_single_threaded():
    def run():
        cfg = get_cfg()
        cfg.DATALOADER.NUM_WORKERS = 2
        with forced_platform("linux"):
            loader = build_dataloader(
                _SeedReport(),
                batch_sampler=torch.utils.data.BatchSampler(range(8), 1, False),
                collate_fn=lambda samples: samples[0],
                cfg=cfg,
                device="cpu",
                seed=5,
            )
        assert loader.decision.mp_context == "fork"
        return list(loader)

    first, second = run(), run()
    assert first == second  # same seed, same worker seeds
    by_worker = {s["worker"]: s for s in first}
    assert set(by_worker) == {0, 1}
    assert by_worker[0]["torch"] != by_worker[1]["torch"]
    assert by_worker[0]["numpy"] != by_worker[1]["numpy"]
    assert all(s["threads"] == 1 for s in first)


# --------------------------------------------------------------------------------------------- one decider
def test_dataloaderx_carries_out_the_decision_and_decides_nothing():
    d = decide("linux", num_workers=0, num_threads=2, background=False)
    d.background = True  # whatever the decision says is done, even against the loader's own arguments
    d.thread_prefetch = 3
    loader = DataLoaderX(KeyedAugDataset(), batch_size=4, background=False, num_threads=0, decision=d, seed=0)
    assert loader.background is True and loader.num_threads == 2 and loader.decision is d
    assert sum(len(b["index"]) for b in loader) == 24
    built = create_dataloader(
        KeyedAugDataset(), batch_size=4, shuffle=False, num_workers=0, num_threads=2, seed=0
    )
    assert built.decision.thread_prefetch == 4 and built.num_threads == 2  # prefetch 2 x 2 threads


def test_explicit_builder_takes_a_request_and_no_cfg():
    from torch.utils.data import BatchSampler, SequentialSampler

    loader = build_dataloader(
        KeyedAugDataset(),
        batch_sampler=BatchSampler(SequentialSampler(range(24)), 6, False),
        request=LoaderRequest(num_workers=0, timeout=0),
        device="cpu",
        seed=1,
    )
    assert [len(b["index"]) for b in loader] == [6, 6, 6, 6] and loader.decision.timeout == 0
    with pytest.raises(TypeError, match="request= .* or cfg="):
        build_dataloader(KeyedAugDataset(), batch_sampler=[[0]], request=LoaderRequest(), cfg=get_cfg())
