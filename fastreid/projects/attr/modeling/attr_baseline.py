"""``AttrBaseline``: fastreid's ``Baseline`` (backbone, head, pixel normalisation) trained with
the weighted binary cross-entropy (upstream FastAttr's meta architecture)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

import torch

from fastreid.modeling.meta_arch.baseline import Baseline
from fastreid.modeling.meta_arch.build import META_ARCH_REGISTRY
from fastreid.modeling.meta_arch.common import check_loss_names

from ...registration import register_once
from .bce_loss import cross_entropy_sigmoid_loss

__all__ = ["AttrBaseline", "ATTR_LOSSES"]

#: MODEL.LOSSES.NAME entries AttrBaseline computes -> key in the loss dict.
ATTR_LOSSES = {"BinaryCrossEntropyLoss": "loss_bce"}


class AttrBaseline(Baseline):
    """Training: ``model(batch)`` with ``batch["targets"]`` the N x C float labels returns
    ``{"loss_bce": ...}``. Eval: the head's N x C attribute scores.

    ``sample_weights`` (C positive ratios of the training set, set by the trainer when
    ``MODEL.LOSSES.BCE.WEIGHT_ENABLED``; None: unweighted) weights the loss as upstream.
    """

    sample_weights: Optional[torch.Tensor] = None

    @classmethod
    def from_config(cls, cfg) -> dict:
        base_res = Baseline.from_config(cfg)
        check_loss_names(base_res["loss_kwargs"]["loss_names"], supported=tuple(ATTR_LOSSES))
        base_res["loss_kwargs"].update({"bce": {"scale": cfg.MODEL.LOSSES.BCE.SCALE}})
        return base_res

    def losses(self, outputs: Mapping[str, torch.Tensor], gt_labels: torch.Tensor) -> dict[str, torch.Tensor]:
        cls_outputs = outputs["cls_outputs"]
        if gt_labels.shape != cls_outputs.shape:
            raise ValueError(
                f"AttrBaseline needs targets of shape N x {cls_outputs.size(-1)} (one label per attribute, "
                f"MODEL.HEADS.NUM_CLASSES); got {tuple(gt_labels.shape)}"
            )
        loss_dict: dict[str, torch.Tensor] = {}
        if "BinaryCrossEntropyLoss" in self.loss_kwargs["loss_names"]:
            bce_kwargs = self.loss_kwargs["bce"]
            loss_dict["loss_bce"] = (
                cross_entropy_sigmoid_loss(cls_outputs, gt_labels, self.sample_weights) * bce_kwargs["scale"]
            )
        return loss_dict


register_once(META_ARCH_REGISTRY, AttrBaseline)
