"""Gallery search: exact top-k equals brute force, approximate recall is measured, saved indexes
re-open, and Rank-1 from a search equals the evaluator's."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from fastreid.inference.search import (
    GalleryIndex,
    IndexSpec,
    SearchIndexError,
    evaluation_depth,
    market_labels,
    rank_accuracy,
    recall_against_exact,
)


def _clustered(n: int, d: int = 32, centres: int = 20, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(centres, d)).astype(np.float32)
    return (c[rng.integers(0, centres, n)] + 0.3 * rng.normal(size=(n, d))).astype(np.float32)


def _brute_force(q: np.ndarray, g: np.ndarray, metric: str, k: int) -> tuple[np.ndarray, np.ndarray]:
    if metric == "cosine":
        qn, gn = q / np.linalg.norm(q, axis=1, keepdims=True), g / np.linalg.norm(g, axis=1, keepdims=True)
        dist = 1 - qn @ gn.T
    else:
        dist = ((q[:, None, :] - g[None, :, :]) ** 2).sum(-1)
    order = np.argsort(dist, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(dist, order, 1), order


@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
def test_exact_topk_equals_brute_force(metric):
    g, q = _clustered(500, seed=1), _clustered(40, seed=2)
    g_copy = g.copy()
    index = GalleryIndex.build(g, spec=IndexSpec(metric=metric, kind="flat"))
    dist, idx = index.search(q, 7)
    ref_dist, ref_idx = _brute_force(q.astype(np.float64), g.astype(np.float64), metric, 7)
    np.testing.assert_array_equal(idx, ref_idx)
    np.testing.assert_allclose(dist, ref_dist, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(g, g_copy)  # the caller's features are not normalised in place
    assert index.search(q, 10_000)[1].shape == (40, 500)  # k beyond the gallery: the whole gallery


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_approximate_index_recall_is_measured(kind, tmp_path):
    g, q = _clustered(3000, seed=3), _clustered(100, seed=4)
    exact = GalleryIndex.build(g, spec=IndexSpec(kind="flat"))
    approx = GalleryIndex.build(g, [f"g{i}.jpg" for i in range(3000)], IndexSpec(kind=kind, nprobe=8))
    assert not approx.exact
    _, e_idx = exact.search(q, 10)
    _, a_idx = approx.search(q, 10)
    recall = recall_against_exact(a_idx, e_idx, (1, 10))
    assert set(recall) == {1, 10} and all(0.0 <= v <= 1.0 for v in recall.values())
    assert recall[10] > 0.5  # a working index, not random neighbours
    assert recall_against_exact(e_idx, e_idx, (1, 10)) == {1: 1.0, 10: 1.0}
    # save, re-open: same answers, same file names, same settings
    written = approx.save(str(tmp_path / "gallery.faiss"))
    assert all(os.path.exists(p) for p in written)
    again = GalleryIndex.open(str(tmp_path / "gallery.faiss"))
    assert again.spec == approx.spec and again.files == approx.files
    np.testing.assert_array_equal(again.search(q, 10)[1], a_idx)


def test_open_missing_index_is_a_user_error(tmp_path):
    with pytest.raises(SearchIndexError, match="missing"):
        GalleryIndex.open(str(tmp_path / "nope.faiss"))
    with pytest.raises(SearchIndexError, match="index type"):
        GalleryIndex.build(_clustered(10), spec=IndexSpec(kind="lsh"))


def test_rank_accuracy_equals_the_evaluator():
    from fastreid.evaluation.rank import evaluate_rank
    from fastreid.utils.compute_dist import build_dist

    rng = np.random.default_rng(0)
    g_pids = rng.integers(-1, 30, 400)  # -1: junk images, dropped by the Market data set
    g_camids = rng.integers(1, 7, 400)
    q_pids, q_camids = rng.integers(0, 30, 60), rng.integers(1, 7, 60)
    centres = rng.normal(size=(31, 16)).astype(np.float32)
    g = centres[g_pids + 1] + 0.8 * rng.normal(size=(400, 16)).astype(np.float32)
    q = centres[q_pids + 1] + 0.8 * rng.normal(size=(60, 16)).astype(np.float32)
    keep = g_pids != -1
    cmc, _, _ = evaluate_rank(
        build_dist(q, g[keep], "cosine"), q_pids, g_pids[keep], q_camids, g_camids[keep]
    )
    index = GalleryIndex.build(g, spec=IndexSpec(kind="flat"))
    depth = evaluation_depth(q_pids, q_camids, g_pids, g_camids, max_rank=10)
    _, idx = index.search(q, depth)
    got = rank_accuracy(idx, q_pids, q_camids, g_pids, g_camids)
    for r in (1, 5, 10):
        assert got[f"Rank-{r}"] == pytest.approx(float(cmc[r - 1]) * 100, abs=1e-4)


def test_market_labels():
    pids, cams = market_labels(["/a/0002_c1s1_000451_03.jpg", "-1_c3s2_0001_00.jpg"])
    assert pids.tolist() == [2, -1] and cams.tolist() == [1, 3]
    with pytest.raises(SearchIndexError, match="Market-1501"):
        market_labels(["photo.jpg"])


@pytest.mark.slow
def test_search_rank1_equals_the_evaluator_on_a_synthetic_market(
    synthetic_market_root, tiny_model_files, tmp_path, monkeypatch
):
    """The README's flow: extract query and gallery features, search with --evaluate; Rank-1 is the
    evaluator's."""
    from fastreid.cli import extract as extract_tool
    from fastreid.cli import search as search_tool
    from fastreid.config import get_cfg
    from fastreid.engine import DefaultTrainer
    from fastreid.modeling import build_model
    from fastreid.utils.checkpoint import Checkpointer

    monkeypatch.setenv("FASTREID_DATASETS", synthetic_market_root)
    config_file, weights = tiny_model_files
    cfg = get_cfg()
    cfg.merge_from_file(config_file)
    model = build_model(cfg, log_summary=False)
    Checkpointer(model).load(weights)
    results = DefaultTrainer.test(cfg, model)

    market = os.path.join(synthetic_market_root, "Market-1501-v15.09.15")
    for part, out in (("query", "q"), ("bounding_box_test", "g")):
        args = extract_tool.get_parser().parse_args(
            [
                "--config-file",
                config_file,
                "--input",
                os.path.join(market, part),
                "--output",
                str(tmp_path / out),
                "--device",
                "cpu",
                "MODEL.WEIGHTS",
                weights,
            ]
        )
        assert extract_tool.main(args) == 0
    args = search_tool.get_parser().parse_args(
        [
            "--query",
            str(tmp_path / "q"),
            "--gallery",
            str(tmp_path / "g"),
            "--output",
            str(tmp_path / "s"),
            "--evaluate",
            "--pictures",
            "2",
            "--config-file",
            config_file,
        ]
    )
    summary = search_tool.main(args)
    assert summary["Rank-1"] == pytest.approx(results["Rank-1"], abs=1e-4)
    assert summary["Rank-5"] == pytest.approx(results["Rank-5"], abs=1e-4)
    rows = (tmp_path / "s" / "topk.csv").read_text().splitlines()
    assert rows[0] == "query,rank,gallery,distance,match"
    assert len(rows) == 1 + 10 * summary["queries"]
    assert len(json.loads((tmp_path / "s" / "topk.json").read_text())) == summary["queries"]
    assert len(os.listdir(tmp_path / "s" / "rank_lists")) == 2
    # query images instead of query features: extracted on the fly, same answer
    args = search_tool.get_parser().parse_args(
        [
            "--query",
            os.path.join(market, "query"),
            "--gallery",
            str(tmp_path / "g"),
            "--output",
            str(tmp_path / "s2"),
            "--evaluate",
            "--pictures",
            "0",
            "--config-file",
            config_file,
            "--device",
            "cpu",
            "MODEL.WEIGHTS",
            weights,
        ]
    )
    assert search_tool.main(args)["Rank-1"] == pytest.approx(results["Rank-1"], abs=1e-4)


def test_search_tool_prints_recall_and_reopens_its_index(tmp_path, capsys):
    from fastreid.cli import search as search_tool

    np.save(tmp_path / "g.npy", _clustered(2000, seed=5))
    np.save(tmp_path / "q.npy", _clustered(50, seed=6))
    args = search_tool.get_parser().parse_args(
        [
            "--query",
            str(tmp_path / "q.npy"),
            "--gallery",
            str(tmp_path / "g.npy"),
            "--index-type",
            "hnsw",
            "--output",
            str(tmp_path / "s"),
            "-k",
            "5",
            "--save-index",
            str(tmp_path / "g.faiss"),
        ]
    )
    summary = search_tool.main(args)
    out = capsys.readouterr().out
    assert "recall against exact search (50 queries): recall@1" in out and "recall@5" in out
    assert set(summary["recall"]) == {"recall@1", "recall@5"}
    first = (tmp_path / "s" / "topk.csv").read_text()
    args = search_tool.get_parser().parse_args(
        [
            "--query",
            str(tmp_path / "q.npy"),
            "--index",
            str(tmp_path / "g.faiss"),
            "--output",
            str(tmp_path / "s2"),
            "-k",
            "5",
        ]
    )
    search_tool.main(args)
    assert (tmp_path / "s2" / "topk.csv").read_text() == first
