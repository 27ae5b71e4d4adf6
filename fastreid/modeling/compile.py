"""Speed settings applied to a model: the precision decision's memory format and ``MODEL.COMPILE``
for training (:func:`apply_model_options`), and the inference-only copy the evaluation and the
predictor run (:func:`optimize_for_inference`).

- Channels-last memory: where :mod:`fastreid.utils.precision` decides bfloat16 on the CPU (oneDNN's
  bfloat16 convolutions run on NHWC), or with ``MODEL.CHANNELS_LAST True`` on any device.
- ``MODEL.COMPILE`` (off by default: ``torch.compile`` spends tens of seconds to minutes compiling
  before the first step; ``benchmarks/README.md``, "precision") compiles the module in place
  (``nn.Module.compile``), so state-dict keys stay the same (no ``_orig_mod.`` prefix) and
  checkpoints remain compatible with upstream and with uncompiled runs.
- :func:`optimize_for_inference`: a copy with every BatchNorm after a convolution folded into it
  (:mod:`fastreid.modeling.bn_folding`), in the decided memory format; both measured faster on the
  CPU for fp32 and bf16 alike (``benchmarks/precision.py --part forward``). The model given is
  left as it is.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import torch
from torch import nn

from fastreid.utils.precision import PrecisionDecision, precision_of_cfg

from .bn_folding import fold_batchnorm

__all__ = ["apply_model_options", "optimize_for_inference"]

logger = logging.getLogger(__name__)


def _device_type(model: nn.Module) -> str:
    tensor = next(model.parameters(), None)
    return tensor.device.type if tensor is not None else "cpu"


def apply_model_options(cfg: Any, model: nn.Module) -> nn.Module:
    """Channels-last memory when the precision decision says so, and ``MODEL.COMPILE``; returns
    ``model`` (changed in place)."""
    m = cfg.MODEL
    decision = precision_of_cfg(cfg, _device_type(model))
    if decision.channels_last:
        model.to(memory_format=torch.channels_last)
        logger.info("Model parameters in channels-last memory format")
    if m.get("COMPILE", False):
        mode = m.get("COMPILE_MODE", "default") or "default"
        backend = m.get("COMPILE_BACKEND", "inductor") or "inductor"
        model.compile(backend=backend, mode=None if backend != "inductor" else mode)
        logger.info(
            "MODEL.COMPILE: forward compiled on first use (torch.compile backend %r, mode %r)", backend, mode
        )
    return model


def optimize_for_inference(
    model: nn.Module,
    decision: PrecisionDecision | None = None,
    *,
    fold_bn: bool = True,
    channels_last: bool | None = None,
) -> nn.Module:
    """A copy of ``model`` in eval mode, prepared for inference: BatchNorms folded into the
    convolutions before them (``fold_bn``) and channels-last memory (``channels_last``; default:
    ``decision.channels_last``). ``model`` itself is not modified. Run the copy under
    ``decision.autocast(training=False)``; it is for inference only (its state dict lacks the
    folded norms). A model that cannot be copied (``copy.deepcopy`` fails) comes back itself,
    with a warning."""
    try:
        prepared = fold_batchnorm(model) if fold_bn else copy.deepcopy(model).eval()
    except (TypeError, RuntimeError, copy.Error) as e:
        logger.warning("The model cannot be copied for inference (%s); it runs as it is", e)
        return model
    if channels_last is None:
        channels_last = bool(decision is not None and decision.channels_last)
    if channels_last:
        prepared.to(memory_format=torch.channels_last)
    return prepared
