"""Evaluation pictures: rank-list strips, CMC, ROC and histogram PNG files from synthetic data."""

import os

import numpy as np
import pytest
import torch
from PIL import Image

from fastreid.evaluation.visualize import (
    rank_list_image,
    save_rank_lists,
    select_queries,
    write_evaluation_pictures,
)


def synthetic(tmp_path, num_q=6, num_g=30):
    g = torch.Generator().manual_seed(0)
    pids = torch.cat([torch.arange(num_q), torch.randint(0, num_q, (num_g,), generator=g)]).numpy()
    feats = torch.randn(num_q, 8, generator=g)[pids] + 0.7 * torch.randn(len(pids), 8, generator=g)
    cams = np.r_[np.zeros(num_q, np.int64), np.ones(num_g, np.int64)]
    paths = []
    for i, pid in enumerate(pids):
        p = tmp_path / f"{i:03d}.jpg"
        colour = tuple(int(c) for c in np.random.default_rng(int(pid)).integers(0, 255, 3))
        Image.new("RGB", (16, 32), colour).save(p)
        paths.append(str(p))
    return feats, pids, cams, paths


@pytest.mark.slow
def test_write_all_pictures(tmp_path):
    feats, pids, cams, paths = synthetic(tmp_path)
    out = write_evaluation_pictures(
        feats[:6],
        feats[6:],
        pids[:6],
        pids[6:],
        cams[:6],
        cams[6:],
        paths[:6],
        paths[6:],
        str(tmp_path / "vis"),
        num_vis=4,
        max_rank=5,
    )
    files = [*out["rank_lists"], out["cmc"], out["roc"], out["distance_hist"]]
    assert len(out["rank_lists"]) == 4
    for f in files:
        assert f.endswith(".png") and os.path.getsize(f) > 0
        with Image.open(f) as img:
            assert img.size[0] > 0
    with Image.open(out["rank_lists"][0]) as strip:
        assert strip.size[0] > 5 * strip.size[1] / 2  # query + 5 gallery cells side by side


def test_rank_list_borders():
    red_or_green = rank_list_image(
        np.zeros((32, 16, 3), np.uint8),
        [np.zeros((32, 16, 3), np.uint8)] * 2,
        [True, False],
        size=(16, 32),
        border=3,
    )
    px = np.asarray(red_or_green)
    cell = 16 + 6
    assert tuple(px[1, 12 + cell + 1]) == (0, 170, 0)  # first gallery cell: true match, green
    assert tuple(px[1, 12 + 2 * cell + 1]) == (220, 0, 0)  # second: false match, red


def test_query_selection_and_errors(tmp_path):
    ap = np.array([0.5, 0.1, 0.9])
    assert list(select_queries(ap, 2, "ascending")) == [1, 0]
    assert list(select_queries(ap, 2, "descending")) == [2, 0]
    assert list(select_queries(ap, 5, "none")) == [0, 1, 2]
    with pytest.raises(ValueError, match="rank_sort"):
        select_queries(ap, 1, "random")
    dist = np.array([[0.1, 0.2]], np.float32)
    with pytest.raises(OSError, match="missing.jpg"):
        save_rank_lists(dist, [1], [1, 2], [0], [1, 1], ["missing.jpg"], ["missing.jpg"] * 2, str(tmp_path))
