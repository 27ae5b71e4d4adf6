"""``PartialTrainer``: :class:`~fastreid.engine.DefaultTrainer` evaluating with the DSR evaluator
(upstream PartialReID's ``train_net.Trainer``), registered for ``PartialBaseline`` so that the
standard ``fastreid-train --config-file configs/PartialReID/partial_market.yml`` trains with it
(:mod:`fastreid.engine.trainers`).

Training is re-ID training (``DATASETS.NAMES``, e.g. Market-1501); each set of ``DATASETS.TESTS``
(Partial-REID, Partial-iLIDS, Occluded-REID, or a re-ID set) is evaluated by
:class:`~.dsr_evaluation.DsrEvaluator`.

``TEST.FLIP.ENABLED`` (upstream's partial_market.yml sets it; upstream's own flip averaging of
the head's triple fails): the foreground feature of an image is averaged with its mirror's, the
spatial features and scores are the image's own (mirroring moves the positions, and DSR matches
positions by content, not place).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Optional

import torch
from torch import nn

from fastreid.engine import DefaultTrainer
from fastreid.engine.trainers import register_trainer
from fastreid.utils.checkpoint import unwrap_model

from .dsr_evaluation import DsrEvaluator
from .partialbaseline import PartialBaseline

__all__ = ["PartialTrainer", "FlipAveragedForeground"]

logger = logging.getLogger("fastreid.partialreid")


class FlipAveragedForeground(nn.Module):
    """``model``'s ``(features, spatial features, scores)``, the features averaged with those of
    the horizontally mirrored images."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, batched_inputs: Mapping[str, Any]):
        features, spatial, scores = self.model(batched_inputs)
        mirrored = dict(batched_inputs)
        mirrored["images"] = torch.as_tensor(batched_inputs["images"]).flip(dims=[3])
        mirrored_features = self.model(mirrored)[0]
        return (features + mirrored_features) / 2, spatial, scores


class PartialTrainer(DefaultTrainer):
    """Upstream's ``Trainer`` of ``projects/PartialReID/train_net.py``."""

    @classmethod
    def build_evaluator(cls, cfg: Any, dataset_name: str, output_dir: Optional[str] = None) -> Any:
        data_loader, num_query = cls.build_test_loader(cfg, dataset_name)
        return data_loader, DsrEvaluator(cfg, num_query, output_dir)

    @classmethod
    def test(cls, cfg: Any, model: nn.Module) -> dict:
        if cfg.TEST.FLIP.ENABLED:
            logger.info("TEST.FLIP: the foreground features are averaged with the mirrored images'")
            cfg = cfg.clone()
            cfg.defrost()
            cfg.TEST.FLIP.ENABLED = False
            cfg.freeze()
            model = FlipAveragedForeground(unwrap_model(model))
        return super().test(cfg, model)


register_trainer(PartialBaseline, PartialTrainer)
