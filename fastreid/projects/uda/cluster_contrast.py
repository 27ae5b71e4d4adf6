"""``ClusterContrast``: a re-ID model trained against a memory of cluster centroids (Dai et al.,
"Cluster Contrast for Unsupervised Person Re-Identification", ACCV 2022; alibaba/cluster-contrast-reid).

The network is :class:`~fastreid.modeling.meta_arch.Baseline`'s (backbone, then the
``EmbeddingHead``'s pooling and BNNeck) and so is its evaluation: the N x D neck features, and a
checkpoint that a plain ``Baseline`` config loads. Training differs:

- each image's neck feature (batch statistics, as in training) is L2-normalised and compared with
  every centroid of the **cluster memory** (one unit row per pseudo-label cluster):
  ``loss_contrast`` is the cross-entropy of ``features @ memory.T / temperature`` against the
  image's cluster (InfoNCE over the centroids);
- after the backward pass (a training step; never a forward pass alone) each image of the batch,
  in batch order, moves its centroid: ``c <- m c + (1 - m) f``, then ``c <- c / |c|``, as
  cluster-contrast-reid's ``CM`` does;
- the memory is a non-persistent buffer (not in the model's checkpoint entry): the trainer sets it
  from the cluster means each epoch (:meth:`ClusterContrast.set_memory`) and keeps it, with the
  pseudo labels, as training state in every checkpoint (:mod:`.trainer`).

The classifier of the head is not trained (``MODEL.HEADS.NUM_CLASSES`` stays 0): a source model's
classifier in ``MODEL.WEIGHTS`` is the only part of it that does not load.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import torch
import torch.nn.functional as F

from fastreid.config import CfgNode, ConfigError
from fastreid.modeling.heads import EmbeddingHead
from fastreid.modeling.meta_arch.baseline import Baseline
from fastreid.modeling.meta_arch.build import META_ARCH_REGISTRY

from ..registration import register_once

__all__ = ["ClusterContrast", "update_centroids"]


@torch.no_grad()
def update_centroids(
    memory: torch.Tensor, features: torch.Tensor, targets: torch.Tensor, momentum: float
) -> None:
    """Move the rows of ``memory`` named by ``targets`` towards ``features`` (unit rows), one
    image after the other in batch order: ``c <- momentum * c + (1 - momentum) * f``, then ``c``
    is scaled to unit length. In place."""
    feats = features.to(memory.dtype)
    for f, y in zip(feats, targets.tolist()):
        row = memory[y].mul_(momentum).add_(f, alpha=1.0 - momentum)
        row.div_(row.norm())


class _MemoryLogits(torch.autograd.Function):
    """``features @ memory.T``; the backward pass gives the features' gradient with the memory
    as it was in the forward pass, then updates the memory (:func:`update_centroids`)."""

    @staticmethod
    def forward(
        ctx: Any, features: torch.Tensor, targets: torch.Tensor, memory: torch.Tensor, momentum: float
    ):
        ctx.save_for_backward(features, targets)
        ctx.memory = memory
        ctx.momentum = momentum
        return features.mm(memory.t())

    @staticmethod
    def backward(ctx: Any, *grad_outputs: torch.Tensor):
        features, targets = ctx.saved_tensors
        grad = grad_outputs[0].mm(ctx.memory) if ctx.needs_input_grad[0] else None
        update_centroids(ctx.memory, features, targets, ctx.momentum)
        return grad, None, None, None


class ClusterContrast(Baseline):
    """See the module docstring. ``memory`` is the C x D cluster memory (unit rows; empty until
    :meth:`set_memory`); ``momentum`` and ``temperature`` come from ``UDA.MEMORY``."""

    memory: torch.Tensor

    def __init__(
        self,
        cfg: CfgNode | None = None,
        *,
        momentum: float | None = None,
        temperature: float | None = None,
        **baseline_kwargs: Any,
    ) -> None:
        """``ClusterContrast(cfg)``, or explicitly: Baseline's keyword arguments plus the memory's
        ``momentum`` (default 0.1) and ``temperature`` (0.05). Keywords given with a cfg override
        its values."""
        if cfg is not None:
            from_cfg = type(self).from_config(cfg)
            momentum = from_cfg.pop("momentum") if momentum is None else momentum
            temperature = from_cfg.pop("temperature") if temperature is None else temperature
            from_cfg.pop("momentum", None)
            from_cfg.pop("temperature", None)
            baseline_kwargs = {**from_cfg, **baseline_kwargs}
        momentum = 0.1 if momentum is None else momentum
        temperature = 0.05 if temperature is None else temperature
        super().__init__(**baseline_kwargs)
        if not isinstance(self.heads, EmbeddingHead):
            raise ConfigError(
                f"ClusterContrast trains the EmbeddingHead's neck features; MODEL.HEADS.NAME is "
                f"{type(self.heads).__name__}: set MODEL.HEADS.NAME EmbeddingHead"
            )
        if not 0.0 <= momentum < 1.0 or not temperature > 0.0:
            raise ConfigError(
                f"ClusterContrast needs a momentum in [0, 1) and a positive temperature (UDA.MEMORY.MOMENTUM, "
                f"UDA.MEMORY.TEMP), got {momentum} and {temperature}"
            )
        self.momentum = float(momentum)
        self.temperature = float(temperature)
        feat_dim = int(cast(Any, self.heads).weight.shape[1])
        self.register_buffer("memory", torch.zeros(0, feat_dim), persistent=False)

    @classmethod
    def from_config(cls, cfg: CfgNode) -> dict:
        kwargs = Baseline.from_config(cfg)
        kwargs["momentum"] = cfg.UDA.MEMORY.MOMENTUM
        kwargs["temperature"] = cfg.UDA.MEMORY.TEMP
        return kwargs

    @property
    def feature_dim(self) -> int:
        """D, the width of the features and of the memory's rows."""
        return int(self.memory.shape[1])

    @torch.no_grad()
    def set_memory(self, centroids: torch.Tensor, *, normalize: bool = True) -> None:
        """Use ``centroids`` (C x D) as the memory, their rows scaled to unit length; with
        ``normalize`` False they are taken as they are (a memory saved in a checkpoint: scaling
        unit rows again would change their last bits)."""
        if centroids.dim() != 2 or centroids.shape[1] != self.feature_dim:
            raise ValueError(
                f"the cluster memory needs C x {self.feature_dim} centroids, got {tuple(centroids.shape)}"
            )
        memory = centroids.detach().to(self.device, torch.float32)
        self.memory = F.normalize(memory, dim=1) if normalize else memory.clone()

    def neck_features(self, images: torch.Tensor) -> torch.Tensor:
        """The head's pooled, BNNeck'd features of normalised images, in the model's mode (in
        training, BatchNorm on the batch's statistics)."""
        heads = cast(EmbeddingHead, self.heads)
        pooled = heads.pool_layer(self.backbone(images))
        return heads.bottleneck(pooled)[..., 0, 0]

    def forward(self, batched_inputs: Mapping[str, Any] | torch.Tensor):
        if not self.training:
            return super().forward(batched_inputs)
        images = self.preprocess_image(batched_inputs)
        raw = batched_inputs["targets"] if isinstance(batched_inputs, Mapping) else None
        if isinstance(raw, torch.Tensor) and raw.numel() and bool((raw < 0).all()):
            # a precise-BN pass (targets marked -1): BatchNorm statistics only, the memory untouched
            self.neck_features(images)
            return {"loss_contrast": torch.zeros((), device=self.device)}
        targets = self.training_targets(batched_inputs)
        if self.memory.shape[0] == 0:
            raise RuntimeError("ClusterContrast has no cluster memory: the trainer sets it before each epoch")
        if targets.numel() and int(targets.max()) >= self.memory.shape[0]:
            raise ValueError(
                f"pseudo label {int(targets.max())} names no centroid of the memory ({self.memory.shape[0]})"
            )
        feats = self.neck_features(images)
        with torch.autocast(device_type=self.device.type, enabled=False):
            unit = F.normalize(feats.float(), dim=1)
            logits = _MemoryLogits.apply(unit, targets, self.memory, self.momentum)
            loss = F.cross_entropy(logits / self.temperature, targets)
        return {"loss_contrast": loss}


register_once(META_ARCH_REGISTRY, ClusterContrast)
