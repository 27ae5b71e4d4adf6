"""ImageNet (or other) initial weights for backbones: ``MODEL.BACKBONE.PRETRAIN[_PATH]``.

A local file may be a torchvision state dict, an IBN-Net checkpoint (``{"state_dict": ...}``
with ``module.`` prefixes) or a FastReID checkpoint (``{"model": ...}`` with ``backbone.``
prefixes). Without a file, torchvision's ImageNet weights are fetched into ``TORCH_HOME``.
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from fastreid.config import ConfigError
from fastreid.utils.checkpoint_report import LoadReport, load_state_dict_with_report
from fastreid.utils.safe_load import load_torch_file

from .pretrained_download import PretrainUnavailableError, fetch_pretrained
from .pretrained_urls import PRETRAINED_WEIGHTS, PretrainedWeights, pretrained_weights_for

__all__ = [
    "PretrainUnavailableError",
    "read_checkpoint_file",
    "extract_backbone_state_dict",
    "load_pretrained_backbone",
    "published_state_dict",
]

logger = logging.getLogger(__name__)


def read_checkpoint_file(path: str) -> Any:
    """The contents of a local weights file, read safely (weights-only unpickling, checksum
    when a sidecar exists; full unpickling only with MODEL.TRUST_CHECKPOINT). Every failure is a
    one-line :class:`~fastreid.utils.errors.CheckpointError` naming the file (a missing file is
    a ``ConfigError``: the key names nothing)."""
    if not os.path.isfile(path):
        raise ConfigError(
            f"MODEL.BACKBONE.PRETRAIN_PATH {path!r} does not exist; set it to a local "
            "weights file or set MODEL.BACKBONE.PRETRAIN False"
        )
    return load_torch_file(path, description="MODEL.BACKBONE.PRETRAIN_PATH")


def _strip(prefix: str, state_dict: Mapping[str, Any]) -> OrderedDict[str, Any]:
    if state_dict and all(k.startswith(prefix) for k in state_dict):
        return OrderedDict((k[len(prefix) :], v) for k, v in state_dict.items())
    return OrderedDict(state_dict)


def extract_backbone_state_dict(
    checkpoint: Any, source: str = "checkpoint", drop_prefixes: tuple[str, ...] = ("fc.",)
) -> OrderedDict[str, torch.Tensor]:
    """The backbone's tensors from any of the supported checkpoint layouts.

    Unwraps ``{"model": ...}`` / ``{"state_dict": ...}``, strips DataParallel's ``module.``,
    keeps only ``backbone.*`` entries of whole-model checkpoints (prefix removed) and drops the
    ImageNet classifier (keys starting with one of ``drop_prefixes``).
    """
    state = checkpoint
    for wrapper in ("model", "state_dict", "model_state"):  # FastReID, IBN-Net/OSNet, pycls
        if isinstance(state, Mapping) and isinstance(state.get(wrapper), Mapping):
            state = state[wrapper]
    if not isinstance(state, Mapping) or not any(isinstance(v, torch.Tensor) for v in state.values()):
        raise ConfigError(f"{source} does not hold a state dict (a mapping of names to tensors)")
    state = _strip("module.", {k: v for k, v in state.items() if isinstance(v, torch.Tensor)})
    if any(k.startswith("backbone.") for k in state):
        state = OrderedDict((k[len("backbone.") :], v) for k, v in state.items() if k.startswith("backbone."))
    return OrderedDict((k, v) for k, v in state.items() if not k.startswith(drop_prefixes))


def _fetch_torchvision(weights: Any) -> Mapping[str, torch.Tensor]:
    torch_home = os.environ.get("TORCH_HOME", "~/.cache/torch")
    try:
        return weights.get_state_dict(progress=True, check_hash=True)
    except Exception as e:  # network, proxy, disk or corrupt-file errors all end here
        raise PretrainUnavailableError(
            f"Could not fetch torchvision's ImageNet weights {weights} into TORCH_HOME={torch_home} "
            f"({type(e).__name__}: {e}). Download them elsewhere and set MODEL.BACKBONE.PRETRAIN_PATH "
            f"to the local file ({weights.url}), or set MODEL.BACKBONE.PRETRAIN False to train from "
            "scratch."
        ) from e


def load_pretrained_backbone(
    backbone: nn.Module,
    path: str,
    torchvision_weights: Any | None,
    description: str,
    drop_prefixes: tuple[str, ...] = ("fc.",),
    source: PretrainedWeights | None = None,
) -> LoadReport:
    """Load initial weights into ``backbone`` from ``path``, else from the published ``source``
    (downloaded into TORCH_HOME), else from ``torchvision_weights``.

    ``torchvision_weights`` is None when torchvision has no weights for this architecture; without
    a ``source`` either, a local file is required and the error says so. ``description`` names the
    architecture in messages.
    """
    if path:
        logger.info(f"Loading pretrained {description} weights from {path}")
        state = extract_backbone_state_dict(read_checkpoint_file(path), path, drop_prefixes)
    elif source is not None:
        local = fetch_pretrained(source, description)
        logger.info(f"Loading pretrained {description} weights from {local} ({source.url})")
        state = extract_backbone_state_dict(read_checkpoint_file(local), local, drop_prefixes)
    elif torchvision_weights is None:
        raise PretrainUnavailableError(
            f"MODEL.BACKBONE.PRETRAIN is True but no published ImageNet weights are known for {description}. "
            "Set MODEL.BACKBONE.PRETRAIN_PATH to a local weights file (e.g. IBN-Net's "
            "resnet50_ibn_a-d9d0bb7b.pth, OSNet's osnet_x1_0_imagenet.pth, or a FastReID "
            "model_final.pth), or set MODEL.BACKBONE.PRETRAIN False."
        )
    else:
        logger.info(f"Loading torchvision's ImageNet weights {torchvision_weights} for {description}")
        state = extract_backbone_state_dict(
            _fetch_torchvision(torchvision_weights), str(torchvision_weights), drop_prefixes
        )
    return load_state_dict_with_report(backbone, state, logger=logger)


def published_state_dict(
    family: str, key: str, description: str, torchvision_weights: Any | None = None
) -> OrderedDict[str, torch.Tensor]:
    """The published ImageNet weights of ``family`` variant ``key`` (upstream's ``model_urls``
    keys, e.g. "ibn_50x"), downloaded into TORCH_HOME on first use, as a plain state dict (wrappers
    and ``module.`` prefixes removed, classifier kept): what upstream's ``init_pretrained_weights``
    functions return. ``torchvision_weights`` serves variants whose weights torchvision publishes.
    """
    source = pretrained_weights_for(family, key)
    if source is not None:
        local = fetch_pretrained(source, description)
        logger.info(f"Loading pretrained {description} weights from {local} ({source.url})")
        return extract_backbone_state_dict(read_checkpoint_file(local), local, ())
    if torchvision_weights is not None:
        logger.info(f"Loading torchvision's ImageNet weights {torchvision_weights} for {description}")
        return extract_backbone_state_dict(
            _fetch_torchvision(torchvision_weights), str(torchvision_weights), ()
        )
    known = sorted(variant for fam, variant in PRETRAINED_WEIGHTS if fam == family)
    raise PretrainUnavailableError(
        f"No published ImageNet weights for {description} ({family} {key!r}); published variants: "
        f"{', '.join(known) or 'none'}. Set MODEL.BACKBONE.PRETRAIN_PATH to a local weights file."
    )
