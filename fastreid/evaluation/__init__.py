"""Evaluation: features -> distances -> CMC / mAP / mINP (+ re-ranking, AQE, ROC), no compile step."""

from fastreid.utils.compute_dist import build_dist

from .clas_evaluator import ClasEvaluator
from .evaluator import DatasetEvaluator, DatasetEvaluators, inference_context, inference_on_dataset
from .query_expansion import aqe
from .rank import evaluate_rank, evaluate_rank_from_features
from .reid_evaluation import ReidEvaluator
from .rerank import (
    jaccard_distance,
    re_ranking,
    re_ranking_features,
    re_ranking_knn_jaccard,
    rerank_features,
)
from .roc import evaluate_roc, roc_curve, tpr_at_fpr
from .testing import flatten_results_dict, print_csv_format, results_table, verify_results

__all__ = [
    "ClasEvaluator",
    "DatasetEvaluator",
    "DatasetEvaluators",
    "ReidEvaluator",
    "aqe",
    "build_dist",
    "evaluate_rank",
    "evaluate_rank_from_features",
    "evaluate_roc",
    "flatten_results_dict",
    "inference_context",
    "inference_on_dataset",
    "jaccard_distance",
    "print_csv_format",
    "re_ranking",
    "re_ranking_features",
    "re_ranking_knn_jaccard",
    "rerank_features",
    "results_table",
    "roc_curve",
    "tpr_at_fpr",
    "verify_results",
]
