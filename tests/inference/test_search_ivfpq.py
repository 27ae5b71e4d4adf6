"""Compressed gallery search (ivfpq, opq): ids returned by an index built shard by shard are the
gallery's rows, rerank re-scores them from the shards on disk, recall against exact search is sane,
the streaming build equals the in-memory one, and bad settings are one-line errors."""

from __future__ import annotations

import json
import os

import faiss
import numpy as np
import pytest
import torch

from fastreid.inference.search import (
    GalleryIndex,
    IndexSpec,
    SearchIndexError,
    exact_search,
    recall_against_exact,
)
from fastreid.inference.shards import FeatureShards, FeatureStore

COUNT, DIM, SHARD = 20_000, 64, 6_000  # four shards: 6000, 6000, 6000, 2000 rows


@pytest.fixture(autouse=True)
def one_faiss_thread():
    """One OpenMP thread: the same k-means on any machine, and no spinning on a shared 2-core one."""
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    yield
    faiss.omp_set_num_threads(before)


def _clustered(n: int, seed: int) -> np.ndarray:
    centres = np.random.default_rng(0).normal(size=(400, DIM)).astype(np.float32)
    rng = np.random.default_rng(seed)
    return (centres[rng.integers(0, 400, n)] + 0.3 * rng.normal(size=(n, DIM))).astype(np.float32)


@pytest.fixture(scope="module")
def gallery(tmp_path_factory):
    """The gallery as fastreid-extract writes it: files.txt, meta.json, shards/0000k.npy."""
    folder = str(tmp_path_factory.mktemp("gallery_feats"))
    feats = _clustered(COUNT, seed=1)
    files = [f"g{i:06d}.jpg" for i in range(COUNT)]
    store = FeatureStore(folder, files, SHARD)
    batches = ((files[s : s + 1000], torch.from_numpy(feats[s : s + 1000])) for s in range(0, COUNT, 1000))
    assert store.write(batches) == 4
    return folder, feats, files


@pytest.fixture(scope="module")
def queries():
    return _clustered(200, seed=2)


def _brute(q: np.ndarray, g: np.ndarray, metric: str) -> np.ndarray:
    """float64 distances, queries x gallery, the evaluation's definitions."""
    q, g = q.astype(np.float64), g.astype(np.float64)
    if metric == "cosine":
        q = q / np.linalg.norm(q, axis=1, keepdims=True)
        g = g / np.linalg.norm(g, axis=1, keepdims=True)
        return 1.0 - q @ g.T
    return (q**2).sum(1)[:, None] + (g**2).sum(1)[None, :] - 2 * q @ g.T


_built: dict = {}


def _streamed(gallery, metric: str, kind: str = "ivfpq") -> GalleryIndex:
    key = (metric, kind)
    if key not in _built:
        spec = IndexSpec(metric=metric, kind=kind, nlist=64, nprobe=8, pq_m=8)
        _built[key] = GalleryIndex.build_streaming(gallery[0], spec)
    return _built[key]


def test_feature_shards_number_rows_across_shards(gallery):
    folder, feats, files = gallery
    shards = FeatureShards.open(folder)
    assert shards.num_parts == 4 and len(shards) == COUNT and shards.dim == DIM and shards.files == files
    ids = np.array([19_999, 0, 6_000, 5_999, 12_345, 18_000, 6_000])
    np.testing.assert_array_equal(shards.take(ids), feats[ids])
    starts = [start for start, rows in shards.chunks(4_000)]
    assert starts == [0, 4000, 6000, 10000, 12000, 16000, 18000]
    with pytest.raises(IndexError):
        shards.take(np.array([COUNT]))


def test_feature_shards_read_other_layouts(tmp_path, monkeypatch):
    """float64 / Fortran-order files go through a memory map; without os.preadv (Windows) rows are
    read with seek + readinto; both give the same rows."""
    import fastreid.inference.shards as shards_module  # the module, to switch its preadv flag

    feats = _clustered(500, seed=9)
    np.save(tmp_path / "a.npy", feats[:200].astype(np.float64))
    np.save(tmp_path / "b.npy", np.asfortranarray(feats[200:350]))
    np.save(tmp_path / "c.npy", feats[350:])
    parts = [str(tmp_path / n) for n in ("a.npy", "b.npy", "c.npy")]
    ids = np.array([499, 0, 199, 200, 349, 350, 17])
    np.testing.assert_array_equal(FeatureShards(parts).take(ids), feats[ids])
    monkeypatch.setattr(shards_module, "_PREADV", False)
    np.testing.assert_array_equal(FeatureShards(parts).take(ids), feats[ids])
    with pytest.raises(shards_module.FeatureFileError, match="N x D"):
        np.save(tmp_path / "d.npy", np.zeros(3, np.float32))
        FeatureShards([str(tmp_path / "d.npy")])


@pytest.mark.parametrize(
    ("metric", "kind"),
    [("cosine", "ivfpq"), ("euclidean", "ivfpq"), pytest.param("cosine", "opq", marks=pytest.mark.slow)],
)
def test_ids_are_gallery_rows_with_and_without_rerank(gallery, queries, metric, kind):
    """The bug an earlier attempt had (recall 0.000 with rerank): ids, offsets or metrics mixed up."""
    _, feats, _ = gallery
    index = _streamed(gallery, metric, kind)
    assert index.size == COUNT and index.bytes_per_vector == 8 + 8  # 8 one-byte codes + the id
    exact = _brute(queries, feats, metric)
    ref = np.argsort(exact, axis=1, kind="stable")[:, :10]
    ref_d, ref_i = exact_search(FeatureShards.open(gallery[0]), queries, 10, metric)
    assert recall_against_exact(ref_i, ref, (1, 10))[10] > 0.999  # chunked faiss exact = float64 brute force
    np.testing.assert_allclose(ref_d, np.take_along_axis(exact, ref_i, 1), rtol=1e-4, atol=1e-3)

    d0, i0 = index.search(queries, 10, rerank=0)
    d1, i1 = index.search(queries, 10, rerank=100)
    assert i0.min() >= 0 and i1.min() >= 0 and i0.max() < COUNT
    plain, reranked = recall_against_exact(i0, ref, (1, 10)), recall_against_exact(i1, ref, (1, 10))
    assert plain[10] > 0.15  # compressed distances: neighbours, not random rows (1 / 20000)
    assert reranked[1] >= 0.95 and reranked[10] >= 0.95
    # reranked distances are the exact distances of the very rows returned, sorted
    np.testing.assert_allclose(d1, np.take_along_axis(exact, i1, 1), rtol=1e-4, atol=1e-3)
    assert (np.diff(d1, axis=1) >= 0).all()
    # a gallery row from each shard, as a query, finds itself first (ids and shard offsets agree)
    rows = np.array([3, 5_999, 6_000, 11_111, 17_999, 18_000, 19_999])
    _, own = index.search(feats[rows], 1, rerank=300)
    np.testing.assert_array_equal(own[:, 0], rows)


def test_streaming_build_equals_the_in_memory_build(gallery, queries):
    folder, feats, files = gallery
    streamed = _streamed(gallery, "cosine")
    in_memory = GalleryIndex.build(
        feats, files, IndexSpec(metric="cosine", kind="ivfpq", nlist=64, nprobe=8, pq_m=8)
    )
    assert in_memory.spec == streamed.spec and in_memory.files == streamed.files
    for rerank in (0, 40):
        d_s, i_s = streamed.search(queries, 10, rerank=rerank)
        d_m, i_m = in_memory.search(queries, 10, rerank=rerank)
        np.testing.assert_array_equal(i_s, i_m)
        np.testing.assert_allclose(d_s, d_m, rtol=0, atol=1e-6)


def test_saved_index_reopens_with_its_features_for_rerank(gallery, queries, tmp_path):
    folder, _, files = gallery
    index = _streamed(gallery, "euclidean")
    path = str(tmp_path / "g.faiss")
    index.save(path)
    with open(path + ".json", encoding="utf-8") as f:
        assert json.load(f)["features"] == os.path.abspath(folder)
    again = GalleryIndex.open(path)
    assert again.spec == index.spec and again.files == files and len(again.features) == COUNT
    for rerank in (0, 30):
        np.testing.assert_array_equal(
            again.search(queries, 5, rerank=rerank)[1], index.search(queries, 5, rerank=rerank)[1]
        )
    # rerank without features on disk: a clear error, not wrong rows
    again.features = None
    with pytest.raises(SearchIndexError, match="--rerank"):
        again.search(queries, 5, rerank=30)


def test_recall_ignores_missing_neighbours():
    assert recall_against_exact(np.array([[-1, -1]]), np.array([[-1, -1]]), (1, 2)) == {1: 0.0, 2: 0.0}
    assert recall_against_exact(np.array([[4, -1]]), np.array([[4, 7]]), (2,)) == {2: 0.5}


def test_exact_search_over_chunks_equals_a_flat_index():
    g, q = _clustered(3_000, seed=5), _clustered(30, seed=6)
    for metric in ("cosine", "euclidean"):
        d_ref, i_ref = GalleryIndex.build(g, spec=IndexSpec(metric=metric, kind="flat")).search(q, 7)
        d, i = exact_search(
            FeatureShards.from_arrays([g[:1000], g[1000:1700], g[1700:]]), q, 7, metric, chunk_rows=512
        )
        np.testing.assert_array_equal(i, i_ref)
        np.testing.assert_allclose(d, d_ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (IndexSpec(kind="ivfpq", pq_m=10), "--pq-m 10: must divide the feature size 64"),
        (IndexSpec(kind="opq", train_size=30_000), "--train-size 30,000 is larger than the gallery"),
        (IndexSpec(kind="ivfpq", nlist=1_000), "--nlist 1,000 needs at least 39,000 training vectors"),
        (IndexSpec(kind="ivfpq", nlist=16, train_size=5_000), "--pq-bits 8 needs at least 9,984"),
        (IndexSpec(kind="ivfpq", rerank=-1), "--rerank -1"),
    ],
)
def test_bad_settings_are_one_line_errors(gallery, spec, message):
    with pytest.raises(SearchIndexError) as e:
        GalleryIndex.build_streaming(gallery[0], spec)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_streaming_needs_a_file_on_disk(tmp_path):
    torch.save({"features": torch.zeros(3, 8)}, tmp_path / "g.pt")
    with pytest.raises(SearchIndexError, match="memory map"):
        GalleryIndex.build_streaming(str(tmp_path / "g.pt"), IndexSpec(kind="ivfpq"))
    with pytest.raises(SearchIndexError, match="streaming build makes ivfpq or opq"):
        GalleryIndex.build_streaming(
            FeatureShards.from_arrays([np.zeros((3, 8), np.float32)]), IndexSpec(kind="hnsw")
        )


def test_search_tool_builds_from_shards_and_prints_bytes_and_recall(gallery, queries, tmp_path, capsys):
    from fastreid.cli import search as search_tool  # the command module, after the fixtures made the data

    np.save(tmp_path / "q.npy", queries[:40])
    argv = ["--query", str(tmp_path / "q.npy"), "--gallery", gallery[0], "--index-type", "ivfpq"]
    argv += ["--nlist", "64", "--nprobe", "8", "--pq-m", "8", "--rerank", "100", "--check-recall", "30"]
    argv += ["--output", str(tmp_path / "s"), "--pictures", "0", "--metric", "cosine"]
    argv += ["--save-index", str(tmp_path / "g.faiss")]
    summary = search_tool.main(search_tool.get_parser().parse_args(argv))
    out = capsys.readouterr().out
    assert "16.0 bytes per vector (8-byte code (8 x 8 bits) + 8-byte id)" in out
    assert "recall against exact search (30 queries): recall@1" in out
    assert summary["bytes_per_vector"] == 16 and summary["recall"]["recall@10"] >= 0.9
    first = (tmp_path / "s" / "topk.csv").read_text()
    assert "g0" in first.splitlines()[1]  # gallery file names from the extraction's files.txt
    argv = ["--query", str(tmp_path / "q.npy"), "--index", str(tmp_path / "g.faiss"), "-k", "10"]
    argv += ["--output", str(tmp_path / "s2"), "--pictures", "0", "--check-recall", "30"]
    again = search_tool.main(search_tool.get_parser().parse_args(argv))  # reranks from the shards again
    assert (tmp_path / "s2" / "topk.csv").read_text() == first
    assert again["recall"] == summary["recall"]
