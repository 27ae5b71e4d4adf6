"""How ``DefaultTrainer`` evaluates: a test loader and an evaluator per data set of
``DATASETS.TESTS``, inference over each, results printed and returned (class methods, the places
to override)."""

from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Optional

from torch import nn

from fastreid.config import CfgNode
from fastreid.utils import comm
from fastreid.utils.checkpoint import unwrap_model

__all__ = ["TrainerEvaluation"]

# The name log lines have always carried (upstream's module); fastreid.engine.defaults re-exports.
logger = logging.getLogger("fastreid.engine.defaults")


class TrainerEvaluation:
    """The evaluation class methods of :class:`~fastreid.engine.defaults.DefaultTrainer`."""

    @classmethod
    def build_test_loader(cls, cfg: CfgNode, dataset_name: str):
        from fastreid.data.build import build_reid_test_loader

        return build_reid_test_loader(cfg, dataset_name=dataset_name)

    @classmethod
    def build_evaluator(cls, cfg: CfgNode, dataset_name: str, output_dir: Optional[str] = None):
        from fastreid.evaluation import ReidEvaluator

        data_loader, num_query = cls.build_test_loader(cfg, dataset_name)
        return data_loader, ReidEvaluator(cfg, num_query, output_dir)

    @classmethod
    def test(cls, cfg: CfgNode, model: nn.Module) -> dict:
        """Evaluate on every data set of ``DATASETS.TESTS``; a single data set's results are
        returned flat (upstream's shape)."""
        from fastreid.evaluation import inference_on_dataset, print_csv_format

        model = unwrap_model(model)
        results: OrderedDict = OrderedDict()
        for dataset_name in cfg.DATASETS.TESTS:
            logger.info(f"Prepare testing set {dataset_name}")
            data_loader, evaluator = cls.build_evaluator(cfg, dataset_name)
            try:
                results_i = inference_on_dataset(
                    model, data_loader, evaluator, flip_test=cfg.TEST.FLIP.ENABLED
                )
            finally:
                shutdown = getattr(data_loader, "shutdown", None)
                if callable(shutdown):
                    shutdown()
            results[dataset_name] = results_i
            if comm.is_main_process() and results_i:
                print_csv_format({dataset_name: results_i})
        if len(results) == 1:
            results = next(iter(results.values()))
        return results
