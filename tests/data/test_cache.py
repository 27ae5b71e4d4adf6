"""Decoded cache: same pixels as decoding, invalidation, lazy memmap that pickles small."""

from __future__ import annotations

import os
import pickle
import time

import pytest
import torch
from PIL import Image

from fastreid.data.cache import DecodedCache, default_cache_dir
from fastreid.data.common import CommDataset
from fastreid.data.data_utils import read_image_tensor
from fastreid.data.transforms import Resize


@pytest.fixture
def images(tmp_path):
    folder = tmp_path / "imgs"
    folder.mkdir()
    paths = []
    g = torch.Generator().manual_seed(0)
    for i in range(5):
        arr = torch.randint(0, 256, (40 + i, 20, 3), dtype=torch.uint8, generator=g).numpy()
        p = folder / f"{i:04d}_c1s1_000000_00.jpg"
        Image.fromarray(arr).save(p, quality=90)
        paths.append(str(p))
    return paths


def test_cache_matches_decoding_and_resizing(images):
    cache = DecodedCache(images, [32, 16])
    assert cache.cache_dir == default_cache_dir(images) and cache.cache_dir.endswith(".cache")
    assert not cache.is_valid()
    assert cache.ensure(progress=False) is True
    assert cache.ensure(progress=False) is False  # valid now: not rebuilt
    resize = Resize([32, 16])
    for i, p in enumerate(images):
        got = cache.read(i)
        assert got.dtype == torch.uint8 and got.shape == (3, 32, 16)
        assert torch.equal(got, resize(read_image_tensor(p), None))
    got[:] = 0  # a read is a private copy
    assert cache.read(len(images) - 1).sum() > 0


def test_cache_invalidated_by_changes(images, tmp_path):
    cache = DecodedCache(images, [32, 16], str(tmp_path / "c"))
    cache.ensure(progress=False)
    assert cache.is_valid()
    assert not DecodedCache(images, [24, 12], str(tmp_path / "c")).is_valid()  # another size
    assert not DecodedCache(images[:-1], [32, 16], str(tmp_path / "c")).is_valid()  # another list
    st = os.stat(images[0])
    os.utime(images[0], ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    assert not DecodedCache(images, [32, 16], str(tmp_path / "c")).is_valid()  # a touched file
    rebuilt = DecodedCache(images, [32, 16], str(tmp_path / "c"))
    assert rebuilt.ensure(progress=False) is True and rebuilt.is_valid()


def test_cache_pickles_without_mapping(images, tmp_path):
    cache = DecodedCache(images, [32, 16], str(tmp_path / "c"))
    cache.ensure(progress=False)
    first = cache.read(0)
    assert cache._mm is not None
    blob = pickle.dumps(cache)
    assert len(blob) < 2000  # no pixels, no path list
    clone = pickle.loads(blob)
    assert clone._mm is None and torch.equal(clone.read(0), first)


def test_dataset_reads_from_cache_same_as_decoding(images, tmp_path):
    from fastreid.config import get_cfg
    from fastreid.data.transforms import build_transforms

    cfg = get_cfg()
    cfg.INPUT.SIZE_TRAIN = [32, 16]
    cfg.INPUT.FLIP.ENABLED = cfg.INPUT.PADDING.ENABLED = cfg.INPUT.REA.ENABLED = True
    cfg.INPUT.PADDING.SIZE = 3
    items = [(p, f"x_{i % 2}", "x_0") for i, p in enumerate(images)]
    plain = CommDataset(items, build_transforms(cfg, True))
    cache = DecodedCache(images, [32, 16], str(tmp_path / "c"))
    cache.ensure(progress=False)
    cached = CommDataset(items, build_transforms(cfg, True), cache=cache)
    from fastreid.data.loading.seeds import SampleKey

    for i in range(len(images)):
        key = SampleKey(i, 1000 + i)
        assert torch.equal(plain[key]["images"], cached[key]["images"])
    with pytest.raises(ValueError, match="cache has"):
        CommDataset(items[:2], None, cache=cache)


def test_missing_cache_file_is_explained(images, tmp_path):
    cache = DecodedCache(images, [32, 16], str(tmp_path / "none"))
    with pytest.raises(FileNotFoundError, match="build_cache.py"):
        cache.read(0)


def test_build_cache_tool(tmp_path, monkeypatch, capsys):
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
    try:
        import build_cache
    finally:
        sys.path.pop(0)
    from fastreid.data.synthetic.persons import SyntheticSpec, generate_market1501

    generate_market1501(str(tmp_path), SyntheticSpec.small())
    monkeypatch.setenv("FASTREID_DATASETS", str(tmp_path))
    t0 = time.perf_counter()
    assert (
        build_cache.main(["--no-progress", "INPUT.SIZE_TRAIN", "[64, 32]", "INPUT.SIZE_TEST", "[64, 32]"])
        == 0
    )
    out = capsys.readouterr().out
    assert "built" in out and time.perf_counter() - t0 < 30
    assert (
        build_cache.main(["--no-progress", "INPUT.SIZE_TRAIN", "[64, 32]", "INPUT.SIZE_TEST", "[64, 32]"])
        == 0
    )
    assert "up to date" in capsys.readouterr().out


def test_cache_never_replaces_a_file_it_did_not_write(images, tmp_path):
    from fastreid.data.cache import CacheOwnershipError, is_cache_file

    folder = tmp_path / "c"
    cache = DecodedCache(images, [32, 16], str(folder))
    folder.mkdir()
    with open(cache.data_file, "wb") as f:
        f.write(b"somebody else's file")
    with pytest.raises(CacheOwnershipError, match="not written by the cache"):
        cache.ensure(progress=False)
    with open(cache.data_file, "rb") as f:
        assert f.read() == b"somebody else's file"
    assert not os.path.exists(cache.index_file) and not is_cache_file(cache.data_file)

    os.remove(cache.data_file)
    with open(cache.index_file, "w") as f:
        f.write('{"mine": true}')  # an index-named file that is not the cache's index
    with pytest.raises(CacheOwnershipError):
        cache.ensure(progress=False)
    with open(cache.index_file) as f:
        assert f.read() == '{"mine": true}'


def test_cache_killed_half_way_is_rebuilt(images, tmp_path, monkeypatch):
    from fastreid.data import cache as cache_module
    from fastreid.data.cache import is_cache_file

    cache = DecodedCache(images, [32, 16], str(tmp_path / "c"))
    calls = {"n": 0}
    real = cache_module.DecodedCache._write_index

    def die_after_first_index(self, index):
        real(self, index)
        calls["n"] += 1
        if not index["complete"]:
            raise KeyboardInterrupt

    monkeypatch.setattr(cache_module.DecodedCache, "_write_index", die_after_first_index)
    with pytest.raises(KeyboardInterrupt):
        cache.ensure(progress=False)
    monkeypatch.setattr(cache_module.DecodedCache, "_write_index", real)
    assert is_cache_file(cache.index_file) and not cache.is_valid()
    assert cache.ensure(progress=False) is True and cache.is_valid()
    assert is_cache_file(cache.data_file)
