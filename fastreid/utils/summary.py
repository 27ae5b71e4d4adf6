"""``summary(model, input_size)``: a Keras-style table of a model's layers (output shape and
parameters of each, totals and memory estimates), upstream FastReID's ``fastreid.utils.summary``.
(The log line with parameters and FLOPs at model build is :mod:`fastreid.modeling.summary`.)"""

from __future__ import annotations

import logging
import math
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Union, cast

import torch
from torch import nn

__all__ = ["summary"]

logger = logging.getLogger(__name__)

Shape = Sequence[int]


def _shape(value: Any, batch_size: int) -> Any:
    if isinstance(value, torch.Tensor):
        return [batch_size, *value.shape[1:]]
    if isinstance(value, (list, tuple)):
        return [_shape(v, batch_size) for v in value if isinstance(v, (torch.Tensor, list, tuple, dict))]
    if isinstance(value, dict):
        return {k: _shape(v, batch_size) for k, v in value.items()}
    return []


def _numel(shape: Any) -> int:
    if isinstance(shape, dict):
        return sum(_numel(v) for v in shape.values())
    if shape and isinstance(shape[0], (list, dict)):
        return sum(_numel(s) for s in shape)
    return math.prod(abs(int(d)) for d in shape) if shape else 0


def summary(
    model: nn.Module, input_size: Union[Shape, Sequence[Shape]], batch_size: int = -1, device: str = "cuda"
) -> str:
    """Print (and return) the table for one forward pass of random input of ``input_size``
    (C, H, W; a list of them for several inputs), batch 2. ``device`` "cuda" falls back to the
    CPU, with a log line, where CUDA is missing. Shapes show ``batch_size`` as the batch."""
    device = device.lower()
    if device not in ("cuda", "cpu"):
        raise ValueError(f"summary: device must be 'cuda' or 'cpu', got {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        logger.info("summary: CUDA is not available; running the model on the CPU")
        device = "cpu"
    sizes: list[Shape] = (
        [cast(Shape, input_size)]
        if isinstance(input_size[0], int)
        else list(cast(Sequence[Shape], input_size))
    )
    dtype = next((p.dtype for p in model.parameters()), torch.float32)
    inputs = [torch.rand(2, *size, device=device, dtype=dtype) for size in sizes]  # 2: for batch norms

    rows: OrderedDict[str, dict] = OrderedDict()
    hooks = []

    def hook(module: nn.Module, args: tuple, output: Any) -> None:
        key = f"{type(module).__name__}-{len(rows) + 1}"
        params = sum(p.numel() for p in module.parameters(recurse=False))
        trainable = sum(p.numel() for p in module.parameters(recurse=False) if p.requires_grad)
        rows[key] = {"output_shape": _shape(output, batch_size), "params": params, "trainable": trainable}

    for module in model.modules():
        if module is not model and not isinstance(module, (nn.Sequential, nn.ModuleList, nn.ModuleDict)):
            hooks.append(module.register_forward_hook(hook))
    try:
        with torch.no_grad():
            model(*inputs)
    finally:
        for h in hooks:
            h.remove()

    line = "-" * 64
    lines = [line, f"{'Layer (type)':>20}  {'Output Shape':>25} {'Param #':>15}", "=" * 64]
    for key, row in rows.items():
        lines.append(f"{key:>20}  {str(row['output_shape']):>25} {row['params']:>15,}")
    total = sum(r["params"] for r in rows.values())
    trainable = sum(r["trainable"] for r in rows.values())
    outputs = sum(_numel(r["output_shape"]) for r in rows.values())
    mb = 4.0 / 1024**2  # float32 bytes
    input_mb = abs(sum(math.prod(s) for s in sizes) * batch_size * mb)
    output_mb = abs(2.0 * outputs * mb)  # x2 for the gradients
    params_mb = total * mb
    lines += [
        "=" * 64,
        f"Total params: {total:,}",
        f"Trainable params: {trainable:,}",
        f"Non-trainable params: {total - trainable:,}",
        line,
        f"Input size (MB): {input_mb:0.2f}",
        f"Forward/backward pass size (MB): {output_mb:0.2f}",
        f"Params size (MB): {params_mb:0.2f}",
        f"Estimated Total Size (MB): {input_mb + output_mb + params_mb:0.2f}",
        line,
    ]
    text = "\n".join(lines)
    print(text)
    return text
