"""Model summary at build time: parameter counts and FLOPs of one test-size image (fvcore)."""

from __future__ import annotations

import logging
import warnings

import torch
from torch import nn

__all__ = ["count_parameters", "count_flops", "log_model_summary"]


def count_parameters(model: nn.Module) -> tuple[int, int]:
    """(all parameters, trainable parameters)."""
    total = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return total, trainable


def _attention_flops(inputs, outputs) -> int:
    """fvcore handle for ``aten::scaled_dot_product_attention``: ``q k^T`` and ``attn v``, each
    ``batch x heads x tokens x tokens x head_dim`` multiply-adds (fvcore has no rule for it)."""
    from fvcore.nn.jit_handles import get_shape

    *batch, tokens, head_dim = get_shape(inputs[0])
    keys = get_shape(inputs[1])[-2]
    n = 1
    for d in batch:
        n *= d
    return 2 * n * tokens * keys * head_dim


def count_flops(model: nn.Module, height: int, width: int) -> float:
    """Multiply-adds (fvcore's "flops") of the eval forward on one 3 x height x width image."""
    was_training = model.training
    device = next(model.parameters()).device
    image = torch.zeros(1, 3, height, width, device=device)
    model.eval()
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from fvcore.nn import FlopCountAnalysis

            analysis = FlopCountAnalysis(model, (image,))
            analysis.set_op_handle("aten::scaled_dot_product_attention", _attention_flops)
            analysis.unsupported_ops_warnings(False)
            analysis.uncalled_modules_warnings(False)
            analysis.tracer_warnings("none")
            return float(analysis.total())
    finally:
        model.train(was_training)


def _human(n: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f}{unit}"
    return f"{n:.0f}"


def log_model_summary(model: nn.Module, cfg, logger: logging.Logger | None = None) -> None:
    """Log parameter counts and FLOPs; a failing FLOP count is logged, never raised."""
    logger = logger or logging.getLogger(__name__)
    total, trainable = count_parameters(model)
    height, width = (int(v) for v in cfg.INPUT.SIZE_TEST)
    try:
        flops = f"{_human(count_flops(model, height, width))} FLOPs (multiply-adds) for one {height}x{width} image"
    except Exception as e:  # tracing may fail on exotic modules; the summary is informational
        flops = f"FLOPs not counted ({type(e).__name__}: {e})"
    logger.info(
        f"Model {type(model).__name__}: {_human(total)} parameters ({_human(trainable)} trainable); {flops}"
    )
