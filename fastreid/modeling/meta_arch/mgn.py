"""MGN, the Multiple Granularity Network (Wang et al., 2018), with upstream FastReID's layout.

A ResNet backbone is cut after ``layer3[0]`` (``backbone``); three branches ``b1``, ``b2``, ``b3``
each hold a copy of the rest of layer3 and a layer4: ``b1`` keeps the backbone's layer4 (global),
``b2``/``b3`` use a stride-1 copy without IBN (part branches). ``b2``'s map is cut into 2 horizontal
stripes and ``b3``'s into 3; each whole map and each stripe has its own head (``b1_head``,
``b2_head``, ``b21_head``, ``b22_head``, ``b3_head``, ``b31_head``..``b33_head``). Eval features are
the 8 head outputs concatenated in upstream's order (b1, b2, b3, b21, b22, b31, b32, b33).
Losses (upstream's weights): cross-entropy of each head x 0.125, triplet of b1, b2, b3 and of the
concatenated stripes of b2 and of b3 x 0.2.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from fastreid.config import ConfigError, configurable
from fastreid.layers import get_norm

from ..backbones import build_backbone
from ..backbones.resnet import Bottleneck, ResNet
from ..freeze import FrozenModulesMixin
from ..heads import build_heads
from .build import META_ARCH_REGISTRY
from .common import (
    DEFAULT_LOSS_KWARGS,
    PixelNormalizer,
    check_loss_names,
    check_targets,
    classification_loss,
    loss_kwargs_from_cfg,
    loss_precision,
    metric_loss,
    report_accuracy,
)

__all__ = ["MGN", "MGN_HEADS"]

# head name -> (branch, stripe index or None for the whole map), in upstream's feature order
MGN_HEADS = {
    "b1_head": ("b1", None),
    "b2_head": ("b2", None),
    "b3_head": ("b3", None),
    "b21_head": ("b2", 0),
    "b22_head": ("b2", 1),
    "b31_head": ("b3", 0),
    "b32_head": ("b3", 1),
    "b33_head": ("b3", 2),
}
_CLS_ORDER = ("b1", "b2", "b21", "b22", "b3", "b31", "b32", "b33")
_MGN_LOSSES = ("CrossEntropyLoss", "TripletLoss")


def _part_layer4(resnet: ResNet, bn_norm: str, with_se: bool) -> nn.Sequential:
    """layer4 with stride 1 and no IBN, initialised from the backbone's layer4."""
    kw = resnet._norm_kwargs
    downsample = nn.Sequential(nn.Conv2d(1024, 2048, 1, bias=False), get_norm(bn_norm, 2048, **kw))
    blocks = [Bottleneck(1024, 512, bn_norm, False, with_se, 1, downsample, norm_kwargs=kw)]
    blocks += [Bottleneck(2048, 512, bn_norm, False, with_se, norm_kwargs=kw) for _ in range(2)]
    layer = nn.Sequential(*blocks)
    layer.load_state_dict(resnet.layer4.state_dict())
    return layer


@META_ARCH_REGISTRY.register()
class MGN(FrozenModulesMixin, PixelNormalizer, nn.Module):
    @configurable
    def __init__(
        self,
        *,
        backbone: nn.Module,
        neck1: nn.Module,
        neck2: nn.Module,
        neck3: nn.Module,
        b1_head: nn.Module,
        b2_head: nn.Module,
        b21_head: nn.Module,
        b22_head: nn.Module,
        b3_head: nn.Module,
        b31_head: nn.Module,
        b32_head: nn.Module,
        b33_head: nn.Module,
        pixel_mean: Sequence[float],
        pixel_std: Sequence[float],
        loss_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        """The shared trunk ``backbone``, the branches ``neck1``..``neck3`` (global, 2 and 3
        stripes), a head per map and stripe, pixel statistics and the loss settings
        (cross-entropy only by default)."""
        super().__init__()
        self.backbone = backbone
        self.b1, self.b2, self.b3 = neck1, neck2, neck3
        heads = {
            "b1_head": b1_head,
            "b2_head": b2_head,
            "b21_head": b21_head,
            "b22_head": b22_head,
            "b3_head": b3_head,
            "b31_head": b31_head,
            "b32_head": b32_head,
            "b33_head": b33_head,
        }
        for name in MGN_HEADS:
            setattr(self, name, heads[name])
        self.loss_kwargs = dict(loss_kwargs or DEFAULT_LOSS_KWARGS)
        check_loss_names(self.loss_kwargs["loss_names"], _MGN_LOSSES)
        self.register_pixel_stats(pixel_mean, pixel_std)

    @classmethod
    def from_config(cls, cfg) -> dict:
        resnet = build_backbone(cfg)
        if not isinstance(resnet, ResNet) or resnet.out_channels != 2048:
            raise ConfigError(
                f"MGN needs a ResNet-50/101 backbone (MODEL.BACKBONE.NAME build_resnet_backbone, "
                f"DEPTH 50x or 101x); got {cfg.MODEL.BACKBONE.NAME} {cfg.MODEL.BACKBONE.DEPTH}"
            )
        bb = cfg.MODEL.BACKBONE
        backbone = nn.Sequential(
            resnet.conv1,
            resnet.bn1,
            resnet.relu,
            resnet.maxpool,
            resnet.layer1,
            resnet.layer2,
            resnet.layer3[0],
        )
        res_conv4 = nn.Sequential(*resnet.layer3[1:])
        part_conv5 = _part_layer4(resnet, bb.NORM, bb.WITH_SE)
        return {
            "backbone": backbone,
            "neck1": nn.Sequential(copy.deepcopy(res_conv4), copy.deepcopy(resnet.layer4)),
            "neck2": nn.Sequential(copy.deepcopy(res_conv4), copy.deepcopy(part_conv5)),
            "neck3": nn.Sequential(copy.deepcopy(res_conv4), copy.deepcopy(part_conv5)),
            **{name: build_heads(cfg) for name in MGN_HEADS},
            "pixel_mean": cfg.MODEL.PIXEL_MEAN,
            "pixel_std": cfg.MODEL.PIXEL_STD,
            "loss_kwargs": loss_kwargs_from_cfg(cfg),
        }

    def _head_inputs(self, images: torch.Tensor) -> dict[str, torch.Tensor]:
        """Head name -> the map or stripe it reads."""
        shared = self.backbone(images)
        maps = {"b1": self.b1(shared), "b2": self.b2(shared), "b3": self.b3(shared)}
        stripes = {"b2": torch.chunk(maps["b2"], 2, dim=2), "b3": torch.chunk(maps["b3"], 3, dim=2)}
        if len(stripes["b2"]) != 2 or len(stripes["b3"]) != 3:
            raise ValueError(
                f"MGN cuts feature maps into 2 and 3 stripes, which {maps['b3'].size(2)} rows "
                f"(from {images.shape[2]}-pixel-high images) do not allow; use images whose "
                "feature maps have 3 or 5+ rows (e.g. 48, 96 or 256 pixels high with LAST_STRIDE 1)"
            )
        return {
            name: maps[branch] if stripe is None else stripes[branch][stripe]
            for name, (branch, stripe) in MGN_HEADS.items()
        }

    def forward(self, batched_inputs: Mapping[str, Any] | torch.Tensor):
        inputs = self._head_inputs(self.preprocess_image(batched_inputs))
        if not self.training:
            return torch.cat([getattr(self, name)(x) for name, x in inputs.items()], dim=1)
        targets = self.training_targets(batched_inputs)
        outputs = {name[:-5]: getattr(self, name)(x, targets) for name, x in inputs.items()}
        with torch.autocast(device_type=self.device.type, enabled=False):
            outputs = {k: {n: loss_precision(v) for n, v in out.items()} for k, out in outputs.items()}
            return self.losses(outputs, targets)

    def losses(
        self, outputs: Mapping[str, Mapping[str, torch.Tensor]], gt_labels: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        """``outputs``: head name without ``_head`` -> that head's training outputs."""
        check_targets(gt_labels, outputs["b1"]["cls_outputs"].size(1))
        report_accuracy(outputs["b1"]["pred_class_logits"], gt_labels)
        kw = self.loss_kwargs
        loss_dict: dict[str, torch.Tensor] = {}
        if "CrossEntropyLoss" in kw["loss_names"]:
            for b in _CLS_ORDER:
                loss_dict[f"loss_cls_{b}"] = (
                    classification_loss("CrossEntropyLoss", outputs[b]["cls_outputs"], gt_labels, kw) * 0.125
                )
        if "TripletLoss" in kw["loss_names"]:
            features = {b: outputs[b]["features"] for b in ("b1", "b2", "b3")}
            features["b22"] = torch.cat([outputs[b]["features"] for b in ("b21", "b22")], dim=1)
            features["b33"] = torch.cat([outputs[b]["features"] for b in ("b31", "b32", "b33")], dim=1)
            for b, feat in features.items():
                loss_dict[f"loss_triplet_{b}"] = metric_loss("TripletLoss", feat, gt_labels, kw) * 0.2
        return loss_dict
