"""Re-ID evaluation over a test set whose first ``num_query`` items are queries, the rest gallery."""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import os
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping

import numpy as np
import torch

from fastreid.utils import comm
from fastreid.utils.compute_dist import build_dist
from fastreid.utils.pairwise import default_chunk_rows, iter_dist_chunks

from .details import DETAILS_FILE, EvaluationDetails, compute_details
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

    Into ``output_dir`` (default ``cfg.OUTPUT_DIR``) the main process writes the metrics
    (``evaluation_results.json``) and the per-query details the run report shows
    (``evaluation_details.npz``, :mod:`fastreid.evaluation.details`: each query's ``DETAILS_TOP_K``
    nearest gallery items, AP, first true match, distance histograms; its size grows with the
    number of images, not with query x gallery). The image paths come from the batches'
    ``img_paths``; without them the details have no thumbnails. A failure to write the details is
    logged and never fails the evaluation. ``dataset_name`` labels them.
    """

    #: Gallery items kept per query in the details file.
    DETAILS_TOP_K = 10

    def __init__(self, cfg, num_query: int, output_dir: str | None = None, *, dataset_name: str = "") -> None:
        self.cfg = cfg
        self._num_query = int(num_query)
        self._output_dir = output_dir
        self._dataset_name = str(dataset_name or "")
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
        self._predictions.append(
            {"feats": feats, "pids": pids, "camids": camids, "paths": _paths_of(inputs, len(pids))}
        )

    def _gather(self):
        """Every rank's predictions on rank 0, in rank order (the inference sampler gives each rank
        a contiguous shard, so this is the data set's order); None on the other ranks. Features go
        in bounded chunks (:func:`fastreid.utils.comm.gather_rows`), never one pickle of them all."""
        predictions = self._predictions

        def joined(key: str, empty: torch.Tensor) -> torch.Tensor:
            return torch.cat([p[key] for p in predictions]) if predictions else empty

        feats = joined("feats", torch.empty(0))
        pids = joined("pids", torch.empty(0, dtype=torch.int64))
        camids = joined("camids", torch.empty(0, dtype=torch.int64))
        if all(p.get("paths") is not None for p in predictions):
            paths = [path for p in predictions for path in p["paths"]]
        else:  # some batch came without img_paths: the details have no thumbnails
            paths = [""] * len(pids)
        if comm.get_world_size() > 1:
            comm.synchronize()
            feats = comm.gather_rows(feats)
            pids = comm.gather_rows(pids.to(torch.int64))
            camids = comm.gather_rows(camids.to(torch.int64))
            gathered_paths = comm.gather(paths, dst=0)
            if not comm.is_main_process():
                return None
            paths = [path for part in gathered_paths for path in part]
        if feats is None or len(feats) == 0:
            raise RuntimeError("ReidEvaluator.evaluate: no predictions; was process() called?")
        return feats, pids.numpy().astype(np.int64), camids.numpy().astype(np.int64), paths

    def evaluate(self) -> dict:
        gathered = self._gather()
        if gathered is None:
            return {}
        feats, pids, camids, paths = gathered
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

        def dist_chunks() -> Iterator[tuple[int, int, torch.Tensor]]:
            if dist is None:  # computed again chunk by chunk: never the whole matrix in memory
                yield from iter_dist_chunks(qf, gf, metric)
                return
            rows = max(1, default_chunk_rows(dist.shape[1]))
            for start in range(0, nq, rows):
                end = min(start + rows, nq)
                yield start, end, torch.as_tensor(np.asarray(dist[start:end]), dtype=torch.float32)

        # re-ranked distances have their own scale: the histograms span the values there are
        dist_range = None if dist is None or not test.RERANK.ENABLED else _finite_range(dist)
        self._write_details(
            lambda: compute_details(
                dist_chunks(), qf, gf, q_pids, g_pids, q_camids, g_camids, paths[:nq], paths[nq:],
                all_ap, cmc, f"re-ranked {metric}" if test.RERANK.ENABLED else metric,
                k=self.DETAILS_TOP_K, keep_same_camera=keep_same_camera,
                dist_range=dist_range, dataset=self._dataset_name,
            )
        )  # fmt: skip
        return copy.deepcopy(results)

    def _out_dir(self) -> str | None:
        return self._output_dir or getattr(self.cfg, "OUTPUT_DIR", None) or None

    def _write(self, results: OrderedDict) -> None:
        out_dir = self._out_dir()
        if not out_dir:
            return
        os.makedirs(out_dir, exist_ok=True)
        path = os.path.join(out_dir, RESULTS_FILE)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)
        logger.info("Wrote evaluation results to %s", path)

    def _write_details(self, compute: Callable[[], EvaluationDetails]) -> None:
        """Compute and save the per-query details; any failure is a warning (the metrics stand)."""
        out_dir = self._out_dir()
        if not out_dir:
            return
        path = os.path.join(out_dir, DETAILS_FILE)
        try:
            compute().save(path)
        except Exception as e:  # the report's input only: never worth failing an evaluation for
            logger.debug("Traceback of the details error:", exc_info=True)
            logger.warning(
                f"The per-query details for the report were not written to {path}: {type(e).__name__}: {e}"
            )
            with contextlib.suppress(OSError):
                os.remove(path)  # an older evaluation's details must not pass for this one's
            return
        logger.info("Wrote per-query evaluation details to %s", path)


def _paths_of(inputs: dict, count: int) -> list[str] | None:
    """The batch's image paths as strings, or None when it has none (or not one per image)."""
    paths = inputs.get("img_paths") if isinstance(inputs, Mapping) else None
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    if paths is None or isinstance(paths, torch.Tensor) or len(paths) != count:
        return None
    return [os.fspath(p) if isinstance(p, (str, os.PathLike)) else str(p) for p in paths]


def _finite_range(dist) -> tuple[float, float] | None:
    values = torch.as_tensor(np.asarray(dist), dtype=torch.float32)
    finite = values[torch.isfinite(values)]
    if finite.numel() == 0:
        return None
    return float(finite.min()), float(finite.max())
