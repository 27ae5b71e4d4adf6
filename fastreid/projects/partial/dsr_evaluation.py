"""``DsrEvaluator``: Rank-1/5/10, mAP and mINP of a partial re-ID test set (upstream PartialReID's
evaluator).

The model (a :class:`~.dsr_head.DSRHead`) gives, per image, the foreground feature, the spatial
features (``C x positions``) and the positions' foreground scores. Each is L2-normalised (the
spatial features per position) and the global distance is ``1 - cos`` of the foreground features.
With ``TEST.DSR.ENABLED`` the ranking distance is ``(1 - lambda) * global + lambda * DSR``
(:func:`~.dsr_distance.compute_dsr_dist`), ``lambda`` in 0, 0.01, ..., 1: as upstream, the first
one with the highest Rank-1 **on this test set** is used (an optimistic protocol: the mixing weight
is chosen on the test queries; the chosen value is logged); without it, the global distance
alone. Ranks and AP are :func:`fastreid.evaluation.rank.evaluate_rank`'s (Market's protocol: a
gallery image with the query's pid and camera id is left out).

Beyond upstream: ``metric`` = (mAP + Rank-1) / 2 as the re-ID evaluator gives (what
``model_best.pth`` follows), a Rank-k beyond the gallery's size is the last rank there is, and a
model whose outputs are not the DSR head's triple is a one-line error.
"""

from __future__ import annotations

import copy
import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Optional

import numpy as np
import torch
import torch.nn.functional as F

from fastreid.evaluation.evaluator import DatasetEvaluator
from fastreid.evaluation.rank import evaluate_rank
from fastreid.utils import comm

from .dsr_distance import compute_dsr_dist

__all__ = ["DsrEvaluator", "dsr_metrics", "LAMBDAS"]

logger = logging.getLogger("fastreid.partialreid.dsr_evaluation")

#: The mixing weights tried (upstream's ``0.01 * i`` for i in 0..100).
LAMBDAS = tuple(0.01 * i for i in range(101))


def _rank(dist: np.ndarray, q_pids, g_pids, q_camids, g_camids):
    # max_rank: upstream's 50, or the gallery's size (101 rankings, so no note about a small gallery)
    return evaluate_rank(dist, q_pids, g_pids, q_camids, g_camids, max_rank=min(50, dist.shape[1]))


def _metrics(dist: np.ndarray, q_pids, g_pids, q_camids, g_camids) -> OrderedDict:
    cmc, all_ap, all_inp = _rank(dist, q_pids, g_pids, q_camids, g_camids)
    results: OrderedDict = OrderedDict()
    for r in (1, 5, 10):
        results[f"Rank-{r}"] = float(cmc[min(r, len(cmc)) - 1]) * 100
    results["mAP"] = float(np.mean(all_ap)) * 100
    results["mINP"] = float(np.mean(all_inp)) * 100
    results["metric"] = (results["mAP"] + results["Rank-1"]) / 2
    return results


def dsr_metrics(
    features: torch.Tensor,
    spatial_features: torch.Tensor,
    scores: torch.Tensor,
    pids: Sequence[int],
    camids: Sequence[int],
    num_query: int,
    dsr: bool = True,
) -> tuple[OrderedDict, Optional[float]]:
    """The metrics of normalised ``features`` (N x D), ``spatial_features`` (N x C x m) and
    ``scores`` (N x m), the first ``num_query`` rows the queries; and the ``lambda`` chosen
    (None without ``dsr``)."""
    pids_a, camids_a = np.asarray(pids), np.asarray(camids)
    qf, gf = features[:num_query], features[num_query:]
    dist = 1 - torch.mm(qf, gf.t()).numpy()
    args = (pids_a[:num_query], pids_a[num_query:], camids_a[:num_query], camids_a[num_query:])
    if not dsr:
        return _metrics(dist, *args), None
    dsr_dist = compute_dsr_dist(
        spatial_features[:num_query], spatial_features[num_query:], dist, scores[:num_query]
    )
    best, chosen = 0.0, 0.0
    for lamb in LAMBDAS:
        cmc, _, _ = _rank((1 - lamb) * dist + lamb * dsr_dist, *args)
        if cmc[0] > best:
            best, chosen = float(cmc[0]), lamb
    return _metrics((1 - chosen) * dist + chosen * dsr_dist, *args), chosen


class DsrEvaluator(DatasetEvaluator):
    """``DsrEvaluator(cfg, num_query, output_dir=None)`` (upstream's signature)."""

    def __init__(self, cfg: Any, num_query: int, output_dir: Optional[str] = None) -> None:
        self.cfg = cfg
        self._num_query = num_query
        self._output_dir = output_dir
        self._results: OrderedDict = OrderedDict()
        self.lambda_: Optional[float] = None
        self.reset()

    def reset(self) -> None:
        self.features: list[torch.Tensor] = []
        self.spatial_features: list[torch.Tensor] = []
        self.scores: list[torch.Tensor] = []
        self.pids: list[int] = []
        self.camids: list[int] = []

    def process(self, inputs: Mapping[str, Any], outputs: Any) -> None:
        if torch.is_tensor(outputs) or not isinstance(outputs, Sequence) or len(outputs) != 3:
            raise TypeError(
                "DsrEvaluator needs the DSR head's (features, spatial features, scores) for each batch, "
                f"got {type(outputs).__name__}: set MODEL.HEADS.NAME DSRHead (and MODEL.META_ARCHITECTURE "
                "PartialBaseline)"
            )
        features, spatial, scores = outputs
        self.pids.extend(int(p) for p in torch.as_tensor(inputs["targets"]).flatten().tolist())
        self.camids.extend(int(c) for c in torch.as_tensor(inputs["camids"]).flatten().tolist())
        self.features.append(F.normalize(features.detach().float()).cpu())
        self.spatial_features.append(F.normalize(spatial.detach().float()).cpu())
        self.scores.append(scores.detach().float().cpu())

    def evaluate(self) -> dict:
        features, spatial, scores = self.features, self.spatial_features, self.scores
        pids, camids = self.pids, self.camids
        if comm.get_world_size() > 1:
            comm.synchronize()
            gathered = [comm.gather(x) for x in (features, spatial, scores, pids, camids)]
            if not comm.is_main_process():
                return {}
            features, spatial, scores, pids, camids = (sum(g, []) for g in gathered)
        if not features:
            raise ValueError("DsrEvaluator: no test images were evaluated")
        feats = torch.cat(features)
        if self.cfg.TEST.METRIC == "cosine":
            feats = F.normalize(feats, dim=1)
        dsr = bool(self.cfg.TEST.DSR.ENABLED)
        if dsr:
            logger.info("Testing with DSR setting")
        self._results, self.lambda_ = dsr_metrics(
            feats, torch.cat(spatial), torch.cat(scores), pids, camids, self._num_query, dsr
        )
        if dsr:
            logger.info(f"DSR: global and DSR distances mixed with lambda {self.lambda_:.2f} (best Rank-1)")
        return copy.deepcopy(self._results)
