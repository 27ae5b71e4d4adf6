"""``DefaultPredictor``: upstream FastReID's way to get features from a config and its weights.

    predictor = DefaultPredictor(cfg)          # cfg.MODEL.WEIGHTS is loaded
    features = predictor(images)               # images: N x 3 x H x W, RGB, 0..255 -> N x D on the CPU

As upstream: the model is built without downloading backbone weights, put in eval mode and loaded
from ``MODEL.WEIGHTS`` through the project's ``Checkpointer``; the images must already be resized
to ``INPUT.SIZE_TEST`` (:class:`fastreid.inference.FeatureExtractor` does that, and batching, for
paths, PIL images and arrays). Features are the model's, not L2-normalised (``F.normalize`` them for
cosine similarity).
"""

from __future__ import annotations

import logging
import os
import pickle
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from fastreid.config import CfgNode
from fastreid.utils.checkpoint import Checkpointer
from fastreid.utils.device import resolve_device
from fastreid.utils.errors import CheckpointError

__all__ = ["DefaultPredictor", "num_classes_in_checkpoint"]

logger = logging.getLogger(__name__)


def num_classes_in_checkpoint(path: str) -> int:
    """Rows of the classifier (``heads.weight``) saved in checkpoint ``path``; 0 when unknown.

    A config used for inference often says ``MODEL.HEADS.NUM_CLASSES: 0`` (set from the training
    set at training time); the classifier is unused for features but must match to load strictly.
    """
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, ValueError, pickle.UnpicklingError):
        return 0  # the Checkpointer reports what is wrong with the file
    state = state.get("model", state) if isinstance(state, Mapping) else {}
    weight = state.get("heads.weight", state.get("module.heads.weight"))
    return int(weight.shape[0]) if isinstance(weight, torch.Tensor) and weight.dim() == 2 else 0


def _inference_config(cfg: CfgNode) -> CfgNode:
    """A copy of ``cfg`` for inference: no backbone download, classifier size from the weights,
    ``MODEL.DEVICE`` resolved (CUDA missing -> CPU with one log line)."""
    cfg = cfg.clone()
    cfg.defrost()
    cfg.MODEL.BACKBONE.PRETRAIN = False
    weights = cfg.MODEL.WEIGHTS
    if weights and "://" not in weights and not os.path.isfile(weights):
        raise CheckpointError(f"MODEL.WEIGHTS {weights!r}: no such file")
    if weights and cfg.MODEL.HEADS.NUM_CLASSES == 0:
        cfg.MODEL.HEADS.NUM_CLASSES = num_classes_in_checkpoint(weights) or 1
    resolve_device(cfg)
    cfg.freeze()
    return cfg


class DefaultPredictor:
    """A model in eval mode with ``MODEL.WEIGHTS`` loaded, called on a batch of images.

    ``self.cfg`` is the config actually used (a frozen copy); ``self.model`` the model.
    Without ``MODEL.WEIGHTS`` the model keeps its random initialisation (a warning says so).
    """

    def __init__(self, cfg: CfgNode) -> None:
        from fastreid.modeling import build_model

        self.cfg = _inference_config(cfg)
        self.model: nn.Module = build_model(self.cfg, log_summary=False)
        self.model.eval()
        if self.cfg.MODEL.WEIGHTS:
            Checkpointer(self.model).load(self.cfg.MODEL.WEIGHTS)
        else:
            logger.warning("MODEL.WEIGHTS is empty: the predictor uses a randomly initialised model")

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        """Features (float32, on the CPU) of ``images``: N x 3 x H x W, RGB, uint8 or float on 0..255."""
        inputs: dict[str, Any] = {"images": images.to(self.device, non_blocking=True)}
        with torch.no_grad():
            features = self.model(inputs)
        return features.to("cpu", torch.float32)
