"""``RetriTrainer``: :class:`~fastreid.engine.DefaultTrainer` with upstream FastRetri's evaluator
(upstream's ``train_net.Trainer``, whose only change is ``build_evaluator``).

Upstream's retrieval configs train the standard ``Baseline`` (an ``EmbeddingHead`` with a
classifier over the training classes): the training loader is the re-ID one, each training class
an identity. So this trainer is registered for the retrieval data sets rather than for a meta
architecture (:mod:`fastreid.engine.trainers`): ``fastreid-train --config-file configs/Retri/cub.yml``
picks it because ``DATASETS.TESTS`` names ``CUB``. A re-ID set tested in the same config keeps the
re-ID evaluator.
"""

from __future__ import annotations

from typing import Any, Optional

from fastreid.data.datasets import DATASET_REGISTRY
from fastreid.engine import DefaultTrainer
from fastreid.engine.trainers import register_trainer

from .datasets import RETRIEVAL_DATASETS, Cars196
from .retri_evaluator import RetriEvaluator

__all__ = ["RetriTrainer", "is_retrieval_dataset"]


def is_retrieval_dataset(name: str) -> bool:
    """Whether ``name`` is a retrieval data set: upstream's four names (whoever registered them),
    or a registered class that says ``retrieval = True`` (this family's and their subclasses)."""
    if name in RETRIEVAL_DATASETS:
        return True
    return name in DATASET_REGISTRY and getattr(DATASET_REGISTRY.get(name), "retrieval", False) is True


class RetriTrainer(DefaultTrainer):
    """Upstream's FastRetri ``Trainer``: a retrieval test set is evaluated by
    :class:`~.retri_evaluator.RetriEvaluator` (Recall@K of ``TEST.RECALLS``, mAP@R); any other by
    :class:`~fastreid.evaluation.ReidEvaluator`."""

    @classmethod
    def build_evaluator(cls, cfg: Any, dataset_name: str, output_dir: Optional[str] = None) -> Any:
        if not is_retrieval_dataset(dataset_name):
            return super().build_evaluator(cfg, dataset_name, output_dir)
        data_loader, num_query = cls.build_test_loader(cfg, dataset_name)
        return data_loader, RetriEvaluator(cfg, num_query, output_dir)


register_trainer(Cars196, RetriTrainer)
