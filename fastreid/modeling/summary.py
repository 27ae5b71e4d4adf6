"""Model summary at build time: parameter counts and FLOPs of one test-size image (fvcore)."""

from __future__ import annotations

import logging
import warnings

import torch
from torch import nn

with warnings.catch_warnings():
    # fvcore.nn scripts one of its losses with torch.jit at import, which torch now warns about
    warnings.simplefilter("ignore", FutureWarning)
    from fvcore.nn import FlopCountAnalysis
    from fvcore.nn.jit_handles import get_shape

__all__ = ["count_parameters", "count_flops", "log_model_summary", "summary_image_size"]


def count_parameters(model: nn.Module) -> tuple[int, int]:
    """(all parameters, trainable parameters)."""
    total = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return total, trainable


def _attention_flops(inputs, outputs) -> int:
    """fvcore handle for ``aten::scaled_dot_product_attention``: ``q k^T`` and ``attn v``, each
    ``batch x heads x tokens x tokens x head_dim`` multiply-adds (fvcore has no rule for it)."""
    *batch, tokens, head_dim = get_shape(inputs[0])
    keys = get_shape(inputs[1])[-2]
    n = 1
    for d in batch:
        n *= d
    return 2 * n * tokens * keys * head_dim


def count_flops(model: nn.Module, height: int, width: int) -> float:
    """Multiply-adds (fvcore's "flops") of the eval forward on one 3 x height x width image."""
    was_training = model.training
    device = next(model.parameters(), torch.empty(0)).device
    image = torch.zeros(1, 3, height, width, device=device)
    model.eval()
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
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


def summary_image_size(cfg) -> tuple[int, int] | None:
    """The height and width of one test image after the test transforms: ``INPUT.CROP.SIZE`` when
    the crop is on, else ``INPUT.SIZE_TEST`` (one value: a square, as the shorter side of an image
    of unknown aspect); None when the images keep their own size."""
    crop = cfg.INPUT.CROP
    size = [int(v) for v in (crop.SIZE if crop.ENABLED else cfg.INPUT.SIZE_TEST)]
    if not size or size[0] <= 0:
        return None
    return (size[0], size[0]) if len(size) == 1 else (size[0], size[1])


def log_model_summary(model: nn.Module, cfg, logger: logging.Logger | None = None) -> None:
    """Log parameter counts and FLOPs. Informational only: whatever the model or the config, this
    never raises; what cannot be counted is logged as such."""
    logger = logger or logging.getLogger(__name__)
    try:
        total, trainable = count_parameters(model)
        params = f"{_human(total)} parameters ({_human(trainable)} trainable)"
    except Exception as e:  # a module with unusual parameters; the summary is informational
        params = f"parameters not counted ({type(e).__name__}: {e})"
    try:
        size = summary_image_size(cfg)
        if size is None:
            flops = "FLOPs not counted (INPUT.SIZE_TEST keeps each image's own size)"
        else:
            height, width = size
            flops = f"{_human(count_flops(model, height, width))} FLOPs (multiply-adds) for one {height}x{width} image"
    except Exception as e:  # tracing may fail on exotic modules or inputs; the summary is informational
        flops = f"FLOPs not counted ({type(e).__name__}: {e})"
    logger.info(f"Model {type(model).__name__}: {params}; {flops}")
