"""Generated inputs of the DSR tests (numpy only, so that data/make_upstream_reference.py can use
them next to upstream's code): identities made of "parts", partial queries that show some of
their identity's parts, whole-body gallery images that show all of them."""

from __future__ import annotations

import numpy as np

#: Upstream's dsr_distance hard-codes 110 spatial positions (a 24 x 8 map pooled four ways).
POSITIONS = 110


def make_case(seed: int = 7, num_ids: int = 4, queries_per_id: int = 3, gallery_size: int = 104) -> dict:
    """Features of ``num_ids * queries_per_id`` queries and ``gallery_size`` galleries (3 per query
    identity, the rest one image each of other identities), float64:

    ``features`` (N x 16), ``spatial`` (N x 24 x 110), ``scores`` (N x 110, each row sums to 1),
    ``pids``, ``camids`` (queries camera 1, galleries camera 2, except one gallery image per query
    identity in camera 1 with the same number as a query: left out of the ranking), ``num_query``.
    """
    rng = np.random.default_rng(seed)
    channels, dim, parts = 24, 16, 12
    num_other = gallery_size - 3 * num_ids
    all_ids = num_ids + num_other
    part_bank = rng.standard_normal((all_ids, parts, channels))
    centres = rng.standard_normal((all_ids, dim))

    def image(pid: int, visible: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mix = rng.random((POSITIONS, visible.size)) ** 3
        spatial = mix @ part_bank[pid, visible] + 0.3 * rng.standard_normal((POSITIONS, channels))
        feat = centres[pid] + 1.1 * rng.standard_normal(dim)
        return feat, spatial.T

    feats, spatials, pids, camids = [], [], [], []
    for pid in range(num_ids):
        for k in range(queries_per_id):
            visible = np.sort(rng.choice(parts, size=parts // 2 + k, replace=False))
            f, s = image(pid, visible)
            feats.append(f)
            spatials.append(s)
            pids.append(pid)
            camids.append(1)
    for pid in range(num_ids):
        for k in range(3):
            f, s = image(pid, np.arange(parts))
            feats.append(f)
            spatials.append(s)
            pids.append(pid)
            camids.append(1 if k == 0 else 2)
    for pid in range(num_ids, all_ids):
        f, s = image(pid, np.arange(parts))
        feats.append(f)
        spatials.append(s)
        pids.append(pid)
        camids.append(2)
    scores = rng.random((len(feats), POSITIONS)) + 0.05
    scores /= scores.sum(axis=1, keepdims=True)
    return {
        "features": np.stack(feats),
        "spatial": np.stack(spatials),
        "scores": scores,
        "pids": np.asarray(pids),
        "camids": np.asarray(camids),
        "num_query": num_ids * queries_per_id,
    }


def checksum(case: dict) -> list[float]:
    """Sums that identify the generated inputs (numpy's random stream changed if they differ)."""
    return [float(case[k].sum()) for k in ("features", "spatial", "scores")]
