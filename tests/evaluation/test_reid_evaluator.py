"""ReidEvaluator end to end on fake batches, and inference_on_dataset with a tiny model."""

import json

import numpy as np
import pytest
import torch
from torch import nn

from fastreid.config import get_cfg
from fastreid.evaluation import (
    DatasetEvaluators,
    ReidEvaluator,
    inference_on_dataset,
    print_csv_format,
    reid_evaluation,
)
from fastreid.evaluation.details import DETAILS_FILE, EvaluationDetails
from fastreid.evaluation.rank import evaluate_rank
from fastreid.evaluation.reid_evaluation import RESULTS_FILE
from fastreid.evaluation.rerank import re_ranking_features, re_ranking_knn_jaccard
from fastreid.evaluation.roc import DEFAULT_FPRS, tpr_at_fpr
from fastreid.utils.compute_dist import build_dist

NUM_Q, NUM_G, DIM = 24, 96, 16


def fake_data(seed=0):
    g = torch.Generator().manual_seed(seed)
    pids = torch.cat([torch.arange(12).repeat(2), torch.randint(0, 14, (NUM_G,), generator=g)])
    centres = torch.randn(14, DIM, generator=g)
    feats = centres[pids] + 0.9 * torch.randn(len(pids), DIM, generator=g)
    camids = torch.randint(0, 3, (len(pids),), generator=g)
    return feats, pids, camids


def batches(feats, pids, camids, size=10):
    for s in range(0, len(pids), size):
        yield {
            "images": torch.zeros(len(pids[s : s + size]), 3, 4, 2, dtype=torch.uint8),
            "targets": pids[s : s + size],
            "camids": camids[s : s + size],
            "img_paths": [f"img_{i}.jpg" for i in range(s, min(s + size, len(pids)))],
            "feats": feats[s : s + size],
        }


def run(cfg, out_dir=None):
    feats, pids, camids = fake_data()
    ev = ReidEvaluator(cfg, NUM_Q, output_dir=out_dir)
    ev.reset()
    for batch in batches(feats, pids, camids):
        ev.process(batch, batch["feats"])
    return ev.evaluate(), feats, pids.numpy(), camids.numpy()


def expected(dist, pids, camids):
    cmc, ap, inp = evaluate_rank(dist, pids[:NUM_Q], pids[NUM_Q:], camids[:NUM_Q], camids[NUM_Q:])
    return {
        "Rank-1": cmc[0] * 100,
        "Rank-5": cmc[4] * 100,
        "Rank-10": cmc[9] * 100,
        "mAP": ap.mean() * 100,
        "mINP": inp.mean() * 100,
        "metric": (ap.mean() + cmc[0]) / 2 * 100,
    }


@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
def test_plain_metrics_and_json(tmp_path, metric):
    cfg = get_cfg()
    cfg.TEST.METRIC = metric
    results, feats, pids, camids = run(cfg, str(tmp_path))
    assert list(results) == ["Rank-1", "Rank-5", "Rank-10", "mAP", "mINP", "metric"]
    want = expected(build_dist(feats[:NUM_Q], feats[NUM_Q:], metric), pids, camids)
    for k, v in want.items():
        assert results[k] == pytest.approx(v, abs=1e-4)
    assert 0 < results["mAP"] <= 100
    saved = json.loads((tmp_path / RESULTS_FILE).read_text())
    assert saved == pytest.approx(dict(results))
    print_csv_format({"Market1501": results})


@pytest.mark.parametrize("method", ["knn_jaccard", "k_reciprocal"])
def test_rerank_and_roc_keys(tmp_path, method):
    cfg = get_cfg()
    cfg.TEST.RERANK.ENABLED = True
    cfg.TEST.RERANK.METHOD = method
    cfg.TEST.ROC.ENABLED = True
    cfg.OUTPUT_DIR = str(tmp_path)
    results, feats, pids, camids = run(cfg)
    rerank = re_ranking_knn_jaccard if method == "knn_jaccard" else re_ranking_features
    dist = rerank(feats[:NUM_Q], feats[NUM_Q:], 20, 6, 0.3, metric="cosine")
    for k, v in expected(dist, pids, camids).items():
        assert results[k] == pytest.approx(v, abs=1e-4)
    tprs = tpr_at_fpr(dist, pids[:NUM_Q], pids[NUM_Q:], camids[:NUM_Q], camids[NUM_Q:], DEFAULT_FPRS)
    assert [k for k in results if k.startswith("TPR")] == ["TPR@FPR=1e-04", "TPR@FPR=1e-03", "TPR@FPR=1e-02"]
    assert results["TPR@FPR=1e-02"] == pytest.approx(tprs[1e-2])  # a fraction, upstream's scale
    assert 0 <= results["TPR@FPR=1e-02"] <= 1
    assert (tmp_path / RESULTS_FILE).exists()


def test_unknown_rerank_method_is_named():
    cfg = get_cfg()
    cfg.TEST.RERANK.ENABLED = True
    cfg.TEST.RERANK.METHOD = "bogus"
    with pytest.raises(ValueError, match="TEST.RERANK.METHOD"):
        run(cfg)


def test_aqe_changes_features(tmp_path):
    cfg = get_cfg()
    cfg.OUTPUT_DIR = str(tmp_path)
    plain, *_ = run(cfg)
    cfg.TEST.AQE.ENABLED = True
    with_aqe, *_ = run(cfg)
    assert with_aqe["mAP"] != plain["mAP"]


def test_bad_inputs():
    cfg = get_cfg()
    ev = ReidEvaluator(cfg, 2)
    with pytest.raises(KeyError, match="camids"):
        ev.process({"targets": torch.zeros(2)}, torch.zeros(2, 3))
    with pytest.raises(ValueError, match="feature row"):
        ev.process({"targets": torch.zeros(2), "camids": torch.zeros(2)}, torch.zeros(3, 3))
    with pytest.raises(RuntimeError, match="no predictions"):
        ev.evaluate()
    ev.process(
        {"targets": torch.zeros(2, dtype=torch.long), "camids": torch.zeros(2, dtype=torch.long)},
        torch.zeros(2, 3),
    )
    with pytest.raises(ValueError, match="num_query"):
        ev.evaluate()


class FeatureModel(nn.Module):
    """Returns the features carried in the batch, mirrored features if the images were flipped."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(1, 1)
        self.modes = []

    def forward(self, batch):
        self.modes.append(self.training)
        flipped = bool(batch["images"][0, 0, 0, 0] == 9)  # the marked right column moved left
        return batch["feats"] * (0.5 if flipped else 1.0)


def test_inference_on_dataset_modes_and_flip(tmp_path):
    cfg = get_cfg()
    cfg.OUTPUT_DIR = str(tmp_path)  # results JSON goes there, not into the checkout
    feats, pids, camids = fake_data()
    data = list(batches(feats, pids, camids))
    for b in data:
        b["images"][:, :, :, 1] = 9  # right column differs: flipping is detectable
    model = FeatureModel().train()
    results = inference_on_dataset(model, data, DatasetEvaluators([ReidEvaluator(cfg, NUM_Q)]))
    assert model.training and not any(model.modes)
    assert results["Rank-1"] > 0
    model.modes.clear()
    flipped = inference_on_dataset(model, data, ReidEvaluator(cfg, NUM_Q), flip_test=True)
    assert len(model.modes) == 2 * len(data)
    # averaging x and 0.5 x keeps cosine rankings: same numbers
    assert flipped == pytest.approx(results)


# ------------------------------------------------------------------ per-query details for the report


def _run_with_details(cfg, out_dir, paths=True, dataset_name=""):
    feats, pids, camids = fake_data()
    ev = ReidEvaluator(cfg, NUM_Q, output_dir=str(out_dir), dataset_name=dataset_name)
    ev.reset()
    for batch in batches(feats, pids, camids):
        if not paths:
            del batch["img_paths"]
        ev.process(batch, batch["feats"])
    return ev.evaluate()


@pytest.mark.parametrize("rerank", [False, True], ids=["plain", "reranked"])
def test_evaluation_writes_details_that_agree_with_its_metrics(tmp_path, rerank):
    cfg = get_cfg()
    cfg.TEST.RERANK.ENABLED = rerank
    results = _run_with_details(cfg, tmp_path, dataset_name="Market1501")
    details = EvaluationDetails.load(str(tmp_path / DETAILS_FILE))
    assert details.dataset == "Market1501" and details.metric == ("re-ranked cosine" if rerank else "cosine")
    assert details.q_paths == [f"img_{i}.jpg" for i in range(NUM_Q)]
    assert details.g_paths == [f"img_{i}.jpg" for i in range(NUM_Q, NUM_Q + NUM_G)]
    assert details.topk_index.shape == (NUM_Q, ReidEvaluator.DETAILS_TOP_K)  # bounded: not q x g
    answered = details.first_match >= 0
    assert float(details.cmc[0]) * 100 == results["Rank-1"]
    assert np.mean(details.first_match[answered] == 0) * 100 == pytest.approx(results["Rank-1"])
    assert float(np.mean(details.ap[answered])) * 100 == pytest.approx(results["mAP"], abs=1e-9)
    if rerank:  # the histograms span the re-ranked distances, not the cosine range
        assert details.hist_edges[-1] < 2.0


def test_ap_of_queries_without_a_true_match_is_not_shifted_onto_others(tmp_path):
    """evaluate_rank returns one AP per query that has a true match; in the details each AP stays
    with its own query (NaN for those without one)."""
    cfg = get_cfg()
    feats, pids, camids = fake_data()
    pids = pids.clone()
    pids[0] = 99  # query 0's identity is not in the gallery
    ev = ReidEvaluator(cfg, NUM_Q, output_dir=str(tmp_path))
    for batch in batches(feats, pids, camids):
        ev.process(batch, batch["feats"])
    results = ev.evaluate()
    details = EvaluationDetails.load(str(tmp_path / DETAILS_FILE))
    assert details.first_match[0] == -1 and np.isnan(details.ap[0])
    p, c = pids.numpy(), camids.numpy()
    _, ap, _ = evaluate_rank(
        build_dist(feats[:NUM_Q], feats[NUM_Q:], "cosine"), p[:NUM_Q], p[NUM_Q:], c[:NUM_Q], c[NUM_Q:]
    )
    np.testing.assert_allclose(details.ap[1:], ap)
    assert np.nanmean(details.ap) * 100 == pytest.approx(results["mAP"])


def test_batches_without_image_paths_give_details_without_pictures(tmp_path):
    _run_with_details(get_cfg(), tmp_path, paths=False)
    details = EvaluationDetails.load(str(tmp_path / DETAILS_FILE))
    assert not details.has_images() and len(details.q_paths) == NUM_Q


def test_a_failure_to_write_details_leaves_the_evaluation_and_no_stale_file(tmp_path, monkeypatch, fr_log):
    cfg = get_cfg()
    _run_with_details(cfg, tmp_path)  # an earlier evaluation's details
    assert (tmp_path / DETAILS_FILE).is_file()

    def broken(*args, **kwargs):
        raise MemoryError("simulated")

    monkeypatch.setattr(reid_evaluation, "compute_details", broken)
    results = _run_with_details(cfg, tmp_path)
    assert results["mAP"] > 0 and (tmp_path / RESULTS_FILE).is_file()
    assert not (tmp_path / DETAILS_FILE).exists()
    assert any("were not written" in r.getMessage() and "simulated" in r.getMessage() for r in fr_log.records)
