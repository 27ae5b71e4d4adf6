"""Re-ID evaluation over a test set whose first ``num_query`` items are queries, the rest gallery."""

from __future__ import annotations

import copy
import json
import logging
import os
from collections import OrderedDict

import numpy as np
import torch

from fastreid.utils import comm
from fastreid.utils.compute_dist import build_dist
from fastreid.utils.pairwise import iter_dist_chunks

from .details import DETAILS_FILE, compute_details
from .evaluator import DatasetEvaluator
from .query_expansion import aqe
from .rank import evaluate_rank, evaluate_rank_from_features
from .rerank import rerank_features
from .roc import DEFAULT_FPRS, tpr_at_fpr
from .testing import results_table

__all__ = ["ReidEvaluator", "RESULTS_FILE"]

logger = logging.getLogger(__name__)

RESULTS_FILE = "evaluation_results.json"


class ReidEvaluator(DatasetEvaluator):
    """Collects features, pids and camids; ``evaluate()`` returns percentages in an OrderedDict:
    ``Rank-1``, ``Rank-5``, ``Rank-10``, ``mAP``, ``mINP``, ``metric`` = (mAP + Rank-1) / 2, and with
    ``TEST.ROC.ENABLED`` ``TPR@FPR=1e-04`` / ``1e-03`` / ``1e-02`` (upstream's key format).

    Uses ``TEST.METRIC`` (cosine / euclidean), ``TEST.AQE.*`` and ``TEST.RERANK.*``. Without re-ranking
    or ROC, distances are computed and consumed chunk by chunk (no query x gallery matrix in memory).
    """

    def __init__(self, cfg, num_query: int, output_dir: str | None = None):
        self.cfg = cfg
        self._num_query = int(num_query)
        self._output_dir = output_dir
        self._predictions: list[dict] = []

    def reset(self) -> None:
        self._predictions = []

    def process(self, inputs: dict, outputs: torch.Tensor) -> None:
        missing = [k for k in ("targets", "camids") if k not in inputs]
        if missing:
            raise KeyError(
                f"ReidEvaluator.process: batch lacks {missing}; a test batch needs 'targets' and 'camids'"
            )
        feats = outputs.detach().to("cpu", torch.float32)
        pids = torch.as_tensor(inputs["targets"]).detach().cpu().reshape(-1)
        camids = torch.as_tensor(inputs["camids"]).detach().cpu().reshape(-1)
        if feats.dim() != 2 or feats.shape[0] != len(pids) or len(pids) != len(camids):
            raise ValueError(
                f"ReidEvaluator.process: {tuple(feats.shape)} features for {len(pids)} targets and "
                f"{len(camids)} camids; the model must return one feature row per image in eval mode"
            )
        paths = inputs.get("img_paths")
        paths = (
            [str(p) for p in paths] if isinstance(paths, (list, tuple)) and len(paths) == len(pids) else None
        )
        self._predictions.append({"feats": feats, "pids": pids, "camids": camids, "paths": paths})

    def _gather(self):
        predictions = self._predictions
        if comm.get_world_size() > 1:
            comm.synchronize()
            gathered = comm.gather(predictions, dst=0)
            if not comm.is_main_process():
                return None
            predictions = [p for part in gathered for p in part]
        if not predictions:
            raise RuntimeError("ReidEvaluator.evaluate: no predictions; was process() called?")
        feats = torch.cat([p["feats"] for p in predictions])
        pids = torch.cat([p["pids"] for p in predictions]).numpy().astype(np.int64)
        camids = torch.cat([p["camids"] for p in predictions]).numpy().astype(np.int64)
        self._paths = (
            [path for p in predictions for path in p["paths"]]
            if all(p.get("paths") is not None for p in predictions)
            else None
        )
        return feats, pids, camids

    def evaluate(self) -> dict:
        gathered = self._gather()
        if gathered is None:
            return {}
        feats, pids, camids = gathered
        nq = self._num_query
        if not 0 < nq < len(feats):
            raise ValueError(
                f"num_query={nq} but {len(feats)} items were evaluated; need queries and gallery"
            )
        qf, gf = feats[:nq], feats[nq:]
        q_pids, g_pids, q_camids, g_camids = pids[:nq], pids[nq:], camids[:nq], camids[nq:]
        test = self.cfg.TEST
        metric = test.METRIC
        keep_same_camera = bool(test.get("KEEP_SAME_CAMERA", False))

        if test.AQE.ENABLED:
            logger.info("Test with AQE setting")
            qf, gf = aqe(qf, gf, test.AQE.QE_TIME, test.AQE.QE_K, test.AQE.ALPHA)

        dist = None
        if test.RERANK.ENABLED:
            logger.info("Test with rerank setting")
            dist = rerank_features(
                qf,
                gf,
                test.RERANK.K1,
                test.RERANK.K2,
                test.RERANK.LAMBDA,
                metric=metric,
                method=test.RERANK.get("METHOD", "knn_jaccard"),
            )
        elif test.ROC.ENABLED:
            dist = build_dist(qf, gf, metric)

        if dist is None:
            cmc, all_ap, all_inp = evaluate_rank_from_features(
                qf, gf, q_pids, g_pids, q_camids, g_camids, metric, keep_same_camera=keep_same_camera
            )
        else:
            cmc, all_ap, all_inp = evaluate_rank(
                dist, q_pids, g_pids, q_camids, g_camids, keep_same_camera=keep_same_camera
            )

        results: OrderedDict = OrderedDict()
        m_ap, m_inp = float(np.mean(all_ap)), float(np.mean(all_inp))
        for r in (1, 5, 10):
            results[f"Rank-{r}"] = float(cmc[min(r, len(cmc)) - 1]) * 100
        results["mAP"] = m_ap * 100
        results["mINP"] = m_inp * 100
        results["metric"] = (m_ap + float(cmc[0])) / 2 * 100
        if test.ROC.ENABLED:
            rates = tpr_at_fpr(dist, q_pids, g_pids, q_camids, g_camids, DEFAULT_FPRS, keep_same_camera)
            for fpr, tpr in rates.items():
                results[f"TPR@FPR={fpr:.0e}"] = tpr  # a fraction, as upstream reports it

        logger.debug("Evaluation results:\n%s", results_table(results))  # the trainer prints them, named
        self._write(results)
        self._write_details(qf, gf, dist, q_pids, g_pids, q_camids, g_camids, all_ap, cmc, keep_same_camera)
        return copy.deepcopy(results)

    def _out_dir(self) -> str | None:
        return self._output_dir or getattr(self.cfg, "OUTPUT_DIR", None)

    def _write_details(
        self, qf, gf, dist, q_pids, g_pids, q_camids, g_camids, all_ap, cmc, keep_same_camera
    ) -> None:
        """The per-query details the run report shows (top-k matches, first true match, AP,
        distance histograms), in ``evaluation_details.npz`` beside the results. Bounded in size
        (top ``k`` per query, histograms) and never a reason for the evaluation to fail."""
        out_dir = self._out_dir()
        if not out_dir or int(self.cfg.TEST.get("DETAILS_TOPK", 10)) <= 0:
            return
        nq = len(q_pids)
        paths = getattr(self, "_paths", None) or [""] * (nq + len(g_pids))
        metric = self.cfg.TEST.METRIC
        try:
            if dist is None:
                chunks = iter_dist_chunks(qf, gf, metric)
            else:
                d = torch.as_tensor(np.asarray(dist), dtype=torch.float32)
                chunks = ((i, min(i + 1024, nq), d[i : i + 1024]) for i in range(0, nq, 1024))
            details = compute_details(
                chunks, qf, gf, q_pids, g_pids, q_camids, g_camids, paths[:nq], paths[nq:],
                all_ap, cmc, metric, k=int(self.cfg.TEST.get("DETAILS_TOPK", 10)),
                keep_same_camera=keep_same_camera,
                dist_range=None if dist is None else (0.0, float(torch.as_tensor(np.asarray(dist)).max())),
            )  # fmt: skip
            details.save(os.path.join(out_dir, DETAILS_FILE))
        except Exception as e:  # the report loses its per-query pages; the metrics stand
            logger.warning(f"Could not write the evaluation details for the report: {type(e).__name__}: {e}")

    def _write(self, results: OrderedDict) -> None:
        out_dir = self._out_dir()
        if not out_dir:
            return
        os.makedirs(out_dir, exist_ok=True)
        path = os.path.join(out_dir, RESULTS_FILE)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)
        logger.info("Wrote evaluation results to %s", path)
