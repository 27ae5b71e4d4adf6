"""``PartialBaseline``: fastreid's ``Baseline`` with the DSR head's foreground branch trained as
well (upstream PartialReID's meta architecture)."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from fastreid.modeling.meta_arch.baseline import Baseline
from fastreid.modeling.meta_arch.build import META_ARCH_REGISTRY
from fastreid.modeling.meta_arch.common import check_loss_names, classification_loss, metric_loss

from ..registration import register_once

__all__ = ["PartialBaseline"]


class PartialBaseline(Baseline):
    """Training: Baseline's losses of the global branch, plus ``loss_fore_cls`` (cross-entropy of
    ``fore_cls_outputs``, with ``MODEL.LOSSES.CE``) when ``CrossEntropyLoss`` is named and
    ``loss_fore_triplet`` (triplet loss of ``foreground_features``, with ``MODEL.LOSSES.TRI``)
    when ``TripletLoss`` is, as upstream. Eval: the head's ``(features, spatial features,
    scores)``; needs a head that gives them (``DSRHead``)."""

    @classmethod
    def from_config(cls, cfg) -> dict:
        kwargs = Baseline.from_config(cfg)
        check_loss_names(kwargs["loss_kwargs"]["loss_names"])
        return kwargs

    def losses(self, outputs: Mapping[str, torch.Tensor], gt_labels: torch.Tensor) -> dict[str, torch.Tensor]:
        if "fore_cls_outputs" not in outputs:
            raise ValueError(
                "PartialBaseline needs the DSR head's foreground outputs: set MODEL.HEADS.NAME DSRHead"
            )
        loss_dict = super().losses(outputs, gt_labels)
        names = self.loss_kwargs["loss_names"]
        if "CrossEntropyLoss" in names:
            loss_dict["loss_fore_cls"] = classification_loss(
                "CrossEntropyLoss", outputs["fore_cls_outputs"], gt_labels, self.loss_kwargs
            )
        if "TripletLoss" in names:
            loss_dict["loss_fore_triplet"] = metric_loss(
                "TripletLoss", outputs["foreground_features"], gt_labels, self.loss_kwargs
            )
        return loss_dict


register_once(META_ARCH_REGISTRY, PartialBaseline)
