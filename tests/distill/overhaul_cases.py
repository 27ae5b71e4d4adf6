"""Generated inputs of the overhaul-distillation tests (numpy only, shared with
data/make_upstream_reference.py): student and teacher stage features before their ReLU, and the
teachers' last BatchNorm parameters of each stage."""

from __future__ import annotations

import numpy as np

STUDENT_CHANNELS = (4, 6, 8, 10)
TEACHER_CHANNELS = (5, 7, 9, 12)
SIZES = ((8, 4), (4, 2), (2, 2), (2, 1))
BATCH = 3
TEACHERS = 2


def make_case(seed: int = 11) -> dict:
    """``s_feats`` (4 arrays N x Cs x h x w), ``t_feats`` (per teacher, 4 arrays N x Ct x h x w),
    ``bn_weight`` / ``bn_bias`` (per teacher, 4 vectors of Ct), float64. Some channels have a mean
    far above their spread (upstream's ``-3 s`` branch of the margin), some a negative weight."""
    rng = np.random.default_rng(seed)
    s_feats = [rng.standard_normal((BATCH, c, h, w)) for c, (h, w) in zip(STUDENT_CHANNELS, SIZES)]
    t_feats, weights, biases = [], [], []
    for _ in range(TEACHERS):
        t_feats.append(
            [1.5 * rng.standard_normal((BATCH, c, h, w)) - 0.3 for c, (h, w) in zip(TEACHER_CHANNELS, SIZES)]
        )
        w = [rng.normal(0, 1, c) for c in TEACHER_CHANNELS]
        b = [rng.normal(0, 1.5, c) for c in TEACHER_CHANNELS]
        for j in range(4):
            b[j][0] = 4 * abs(w[j][0])  # Phi(-m/s) <= 0.001
        weights.append(w)
        biases.append(b)
    return {"s_feats": s_feats, "t_feats": t_feats, "bn_weight": weights, "bn_bias": biases}
