"""Single-camera and same-camera data: counted, reported, evaluated with TEST.KEEP_SAME_CAMERA."""

import logging
import os

import numpy as np
import pytest
import torch

from fastreid.config import get_cfg
from fastreid.evaluation import ReidEvaluator, evaluate_rank, evaluate_rank_from_features
from fastreid.evaluation.rank import NoValidQueryError
from fastreid.evaluation.roc import evaluate_roc, tpr_at_fpr
from fastreid.utils.compute_dist import build_dist
from fastreid.utils.errors import UserError


def loop_reference(dist, q_pids, g_pids, q_cams, g_cams, keep_same_camera):
    """Per-query ranking written plainly: AP and first-hit rank of valid queries."""
    aps, firsts = [], []
    for i in range(len(q_pids)):
        order = np.argsort(dist[i], kind="stable")
        keep = np.ones(len(order), bool)
        if not keep_same_camera:
            keep = ~((g_pids[order] == q_pids[i]) & (g_cams[order] == q_cams[i]))
        hits = (g_pids[order][keep] == q_pids[i]).astype(float)
        if not hits.any():
            continue
        ranks = np.flatnonzero(hits) + 1
        aps.append(np.mean(np.arange(1, len(ranks) + 1) / ranks))
        firsts.append(ranks[0])
    return np.array(aps), np.array(firsts)


def single_camera(seed=0, nq=20, ng=80, dim=8):
    g = torch.Generator().manual_seed(seed)
    pids = torch.cat([torch.arange(nq) % 10, torch.randint(0, 10, (ng,), generator=g)])
    feats = torch.randn(10, dim, generator=g)[pids] + torch.randn(nq + ng, dim, generator=g)
    return feats, pids.numpy(), np.zeros(nq + ng, np.int64), nq


def test_single_camera_fails_with_the_switch_named():
    feats, pids, cams, nq = single_camera()
    dist = build_dist(feats[:nq], feats[nq:], "cosine")
    with pytest.raises(NoValidQueryError, match="TEST.KEEP_SAME_CAMERA True") as info:
        evaluate_rank(dist, pids[:nq], pids[nq:], cams[:nq], cams[nq:])
    assert isinstance(info.value, UserError) and "\n" not in str(info.value)


def test_keep_same_camera_evaluates_like_the_plain_loop():
    feats, pids, cams, nq = single_camera()
    cams[nq::3] = 1  # some cross-camera matches too
    dist = build_dist(feats[:nq], feats[nq:], "cosine")
    args = (pids[:nq], pids[nq:], cams[:nq], cams[nq:])
    for keep in (False, True):
        cmc, ap, _ = evaluate_rank(dist, *args, keep_same_camera=keep)
        ref_ap, ref_first = loop_reference(dist, *args, keep)
        np.testing.assert_allclose(ap, ref_ap, atol=1e-6)
        assert cmc[0] == pytest.approx(np.mean(ref_first == 1))
        _, ap2, _ = evaluate_rank_from_features(
            feats[:nq], feats[nq:], *args, "cosine", keep_same_camera=keep
        )
        np.testing.assert_allclose(ap2, ap, atol=1e-6)
    # ROC pairs: with the switch, same-camera true matches are positives instead of dropped
    scores, labels = evaluate_roc(dist, *args, keep_same_camera=True)
    assert int((labels == 0).sum()) == int((pids[nq:][None, :] == pids[:nq, None]).sum())
    assert set(tpr_at_fpr(dist, *args, keep_same_camera=True)) == {1e-4, 1e-3, 1e-2}
    assert len(scores) == dist.size


def test_skipped_queries_are_counted_and_logged(caplog):
    dist = np.array([[0.1, 0.2, 0.3], [0.3, 0.2, 0.1], [0.5, 0.1, 0.2]], np.float32)
    q_pids, g_pids = np.array([5, 7, 9]), np.array([5, 7, 1])
    q_cams, g_cams = np.array([0, 1, 0]), np.array([1, 1, 0])
    with caplog.at_level(logging.WARNING, logger="fastreid.evaluation.rank"):
        cmc, ap, _ = evaluate_rank(dist, q_pids, g_pids, q_cams, g_cams)
    assert len(ap) == 1  # query 0 is valid; query 1 has a same-camera match only; query 2 none
    assert "2 of 3 queries have no valid gallery match" in caplog.text
    assert "1 have matches from their own camera only" in caplog.text


def test_reid_evaluator_with_the_switch(tmp_path):
    feats, pids, cams, nq = single_camera(1)
    cfg = get_cfg()
    cfg.OUTPUT_DIR = str(tmp_path)

    def evaluate():
        ev = ReidEvaluator(cfg, nq)
        for s in range(0, len(feats), 16):
            ev.process(
                {"targets": torch.from_numpy(pids[s : s + 16]), "camids": torch.from_numpy(cams[s : s + 16])},
                feats[s : s + 16],
            )
        return ev.evaluate()

    with pytest.raises(NoValidQueryError, match="KEEP_SAME_CAMERA"):
        evaluate()
    cfg.TEST.KEEP_SAME_CAMERA = True
    results = evaluate()
    assert 0 < results["mAP"] <= 100 and results["Rank-1"] > 0


@pytest.mark.slow
def test_single_camera_data_set_evaluates_through_the_trainer(
    tmp_path, monkeypatch, synthetic_market_root, tiny_resnet18_opts
):
    """The real path: a Market-1501 folder whose test images all come from camera 1, the test loader,
    inference with a model and DefaultTrainer.test: a one-line error naming the switch, then results."""
    import glob
    import re
    import shutil

    from fastreid.engine import DefaultTrainer

    root = tmp_path / "data"
    shutil.copytree(synthetic_market_root, root)  # the shared set is read-only: rename in a copy
    market = os.path.join(root, "Market-1501-v15.09.15")
    for sub in ("query", "bounding_box_test"):
        for path in glob.glob(os.path.join(market, sub, "*.jpg")):
            os.replace(path, re.sub(r"_c\d+s", "_c1s", path))
    monkeypatch.setenv("FASTREID_DATASETS", str(root))
    cfg = get_cfg()
    cfg.merge_from_list(
        [
            *tiny_resnet18_opts,
            "MODEL.HEADS.NUM_CLASSES",
            12,
            "TEST.IMS_PER_BATCH",
            32,
            "OUTPUT_DIR",
            str(tmp_path / "out"),
        ]
    )
    torch.manual_seed(0)
    model = DefaultTrainer.build_model(cfg)
    with pytest.raises(NoValidQueryError, match="TEST.KEEP_SAME_CAMERA True"):
        DefaultTrainer.test(cfg, model)
    cfg.TEST.KEEP_SAME_CAMERA = True
    results = DefaultTrainer.test(cfg, model)
    assert 0 < results["mAP"] <= 100
