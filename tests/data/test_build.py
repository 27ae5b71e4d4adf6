"""build_reid_train_loader / build_reid_test_loader on a tiny synthetic Market-1501."""

from __future__ import annotations

import pickle

import pytest
import torch

from fastreid.config import get_cfg
from fastreid.data.build import build_reid_test_loader, build_reid_train_loader, fast_batch_collator
from fastreid.data.common import CommDataset
from fastreid.data.loading.seeds import SampleKey
from fastreid.data.synthetic.persons import SyntheticSpec


@pytest.fixture(scope="module")
def root(synthetic_market_root):
    """The shared synthetic Market-1501 (read-only; the cache test writes its cache to tmp_path)."""
    return synthetic_market_root


def _cfg(**extra):
    cfg = get_cfg()
    cfg.MODEL.DEVICE = "cpu"
    cfg.INPUT.SIZE_TRAIN = [64, 32]
    cfg.INPUT.SIZE_TEST = [64, 32]
    cfg.INPUT.FLIP.ENABLED = cfg.INPUT.PADDING.ENABLED = cfg.INPUT.REA.ENABLED = True
    cfg.INPUT.PADDING.SIZE = 4
    cfg.SOLVER.IMS_PER_BATCH = 8
    cfg.TEST.IMS_PER_BATCH = 16
    cfg.DATALOADER.SAMPLER_TRAIN = "NaiveIdentitySampler"
    cfg.DATALOADER.NUM_INSTANCE = 2
    cfg.DATALOADER.NUM_WORKERS = 0
    cfg.DATALOADER.NUM_THREADS = 0
    cfg.DATALOADER.BACKGROUND_GENERATOR = False
    cfg.SEED = 5
    for k, v in extra.items():
        node = cfg
        *parents, leaf = k.split("__")
        for p in parents:
            node = node[p]
        node[leaf] = v
    return cfg


def _take(loader, n):
    it = iter(loader)
    return [next(it) for _ in range(n)]


def test_train_loader_batches(root, monkeypatch):
    monkeypatch.setenv("FASTREID_DATASETS", root)
    batches = _take(build_reid_train_loader(_cfg()), 3)
    for b in batches:
        assert set(b) == {"images", "targets", "camids", "img_paths"}
        assert b["images"].shape == (8, 3, 64, 32) and b["images"].dtype == torch.uint8
        assert b["targets"].dtype == torch.int64 and len(b["img_paths"]) == 8
        counts = torch.bincount(b["targets"])
        assert set(counts[counts > 0].tolist()) == {2}  # P x K with K = 2
        assert int(b["targets"].max()) < SyntheticSpec.small().num_train_ids
    again = _take(build_reid_train_loader(_cfg()), 3)
    for a, b in zip(batches, again):
        assert torch.equal(a["images"], b["images"]) and a["img_paths"] == b["img_paths"]


def test_train_loader_resume_and_worker_modes(root, monkeypatch):
    monkeypatch.setenv("FASTREID_DATASETS", root)
    ref = _take(build_reid_train_loader(_cfg(DATALOADER__SAMPLER_TRAIN="TrainingSampler")), 4)
    resumed = _take(
        build_reid_train_loader(_cfg(DATALOADER__SAMPLER_TRAIN="TrainingSampler"), start_iter=2), 2
    )
    for a, b in zip(ref[2:], resumed):
        assert a["img_paths"] == b["img_paths"] and torch.equal(a["images"], b["images"])
    threads = _take(
        build_reid_train_loader(_cfg(DATALOADER__SAMPLER_TRAIN="TrainingSampler", DATALOADER__NUM_THREADS=2)),
        4,
    )
    for a, b in zip(ref, threads):
        assert a["img_paths"] == b["img_paths"] and torch.equal(a["images"], b["images"])
    procs = _take(
        build_reid_train_loader(_cfg(DATALOADER__SAMPLER_TRAIN="TrainingSampler", DATALOADER__NUM_WORKERS=2)),
        4,
    )
    for a, b in zip(ref, procs):
        assert a["img_paths"] == b["img_paths"] and torch.equal(a["images"], b["images"])


def test_train_loader_with_decoded_cache(root, monkeypatch, tmp_path):
    monkeypatch.setenv("FASTREID_DATASETS", root)
    plain = _take(build_reid_train_loader(_cfg()), 2)
    cached = _take(
        build_reid_train_loader(_cfg(DATALOADER__CACHE=True, DATALOADER__CACHE_DIR=str(tmp_path / "cache"))),
        2,
    )
    for a, b in zip(plain, cached):
        assert torch.equal(a["images"], b["images"])


def test_test_loader_order_and_count(root, monkeypatch):
    monkeypatch.setenv("FASTREID_DATASETS", root)
    loader, num_query = build_reid_test_loader(_cfg(), "Market1501")
    paths, pids = [], []
    for b in loader:
        assert b["images"].shape[1:] == (3, 64, 32)
        paths += b["img_paths"]
        pids += b["targets"].tolist()
    from fastreid.data.datasets import Market1501

    ds = Market1501(root=root)
    assert num_query == len(ds.query)
    assert paths == [p for p, _, _ in ds.query + ds.gallery]
    assert pids[:num_query] == [p for _, p, _ in ds.query]
    default_name, _ = build_reid_test_loader(_cfg())  # DATASETS.TESTS[0]
    assert len(default_name.dataset) == len(paths)


def test_unknown_sampler_and_bad_batch(root, monkeypatch):
    monkeypatch.setenv("FASTREID_DATASETS", root)
    with pytest.raises(ValueError, match="SAMPLER_TRAIN"):
        build_reid_train_loader(_cfg(DATALOADER__SAMPLER_TRAIN="Nope"))
    with pytest.raises(ValueError, match="NUM_INSTANCE"):
        build_reid_train_loader(_cfg(SOLVER__IMS_PER_BATCH=9))


def test_missing_root_error(tmp_path, monkeypatch):
    monkeypatch.setenv("FASTREID_DATASETS", str(tmp_path / "empty"))
    with pytest.raises(FileNotFoundError, match="synthetic"):
        build_reid_train_loader(_cfg())


def test_dataset_keys_pickle_and_corrupt_file(root, tmp_path):
    from fastreid.data.datasets import Market1501
    from fastreid.data.transforms import build_transforms

    ds = CommDataset(Market1501(root=root).train, build_transforms(_cfg(), True))
    assert ds.num_classes == SyntheticSpec.small().num_train_ids
    assert len(pickle.dumps(ds)) < 200 * len(ds) + 5000  # paths, labels and small transforms only
    a, b = ds[SampleKey(0, 1)], ds[SampleKey(0, 1)]
    assert torch.equal(a["images"], b["images"])
    assert any(not torch.equal(a["images"], ds[SampleKey(0, s)]["images"]) for s in range(2, 8))
    assert torch.equal(ds[0]["images"], ds[0]["images"])  # a plain index is deterministic too

    bad = tmp_path / "0001_c1s1_000001_01.jpg"
    bad.write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    broken = CommDataset([(str(bad), 1, 0)], build_transforms(_cfg(), False), relabel=False)
    with pytest.raises(OSError, match="0001_c1s1_000001_01.jpg"):
        broken[0]


def test_fast_batch_collator():
    out = fast_batch_collator(
        [
            {
                "images": torch.zeros(3, 2, 2, dtype=torch.uint8),
                "targets": 1,
                "camids": 0,
                "img_paths": "a",
                "w": 0.5,
            },
            {
                "images": torch.ones(3, 2, 2, dtype=torch.uint8),
                "targets": 2,
                "camids": 1,
                "img_paths": "b",
                "w": 1.5,
            },
        ]
    )
    assert out["images"].shape == (2, 3, 2, 2) and out["images"].dtype == torch.uint8
    assert out["targets"].tolist() == [1, 2] and out["img_paths"] == ["a", "b"]
    assert out["w"].dtype == torch.float64
    assert pickle.loads(pickle.dumps(fast_batch_collator)) is fast_batch_collator
    with pytest.raises(TypeError, match="cannot collate"):
        fast_batch_collator([object()])


def test_explicit_forms_take_no_config(root):
    from fastreid.data.datasets import Market1501
    from fastreid.data.loading.request import LoaderRequest
    from fastreid.data.transforms import build_transforms

    data = Market1501(root=root)
    train_set = CommDataset(data.train, build_transforms(_cfg(), True))
    loader = build_reid_train_loader(
        train_set, total_batch_size=4, loader=LoaderRequest(num_threads=2), seed=3, device="cpu"
    )
    assert loader.num_threads == 2 and _take(loader, 2)[0]["images"].shape[0] == 4
    test_set = CommDataset(data.query + data.gallery, build_transforms(_cfg(), False), relabel=False)
    test_loader, num_query = build_reid_test_loader(
        test_set, 8, len(data.query), loader=LoaderRequest(timeout=0)
    )
    assert num_query == len(data.query) and sum(len(b["targets"]) for b in test_loader) == len(test_set)
