"""Export a model to ONNX or TorchScript and check the exported file against PyTorch.

The exported graph takes ``images``: float32 N x 3 x H x W, RGB, on the 0..255 scale (resized to
``INPUT.SIZE_TEST``; normalisation by ``MODEL.PIXEL_MEAN/STD`` is inside), and returns
``features``: N x D, the evaluation's features before flip-averaging and L2-normalisation.
"""

from __future__ import annotations

import copy
import logging
import os
import warnings
from dataclasses import dataclass
from types import ModuleType
from typing import Callable, Optional

import numpy as np
import torch
from torch import nn

from fastreid.utils.errors import UserError
from fastreid.utils.extras import MissingExtraError
from fastreid.utils.extras import require as require_extra

from .backends import onnxruntime_session

__all__ = [
    "CheckResult",
    "ExportCheckError",
    "ExportableModel",
    "MissingExtraError",
    "check_export",
    "export_onnx",
    "export_torchscript",
    "load_exported",
    "on_cpu",
]

logger = logging.getLogger(__name__)


class ExportCheckError(UserError, RuntimeError):
    """The exported model's features differ from PyTorch's by more than the tolerance."""


def require(module: str, purpose: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingExtraError` naming the ``deploy`` extra."""
    return require_extra(module, purpose, "deploy")


class ExportableModel(nn.Module):
    """``images -> features`` for any meta-architecture: the batch dict is built inside, so the
    exported graph has one tensor input and one tensor output."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.model({"images": images})


def on_cpu(model: nn.Module) -> nn.Module:
    """``model`` itself when its weights are on the CPU, else a copy moved there. An exported file
    runs anywhere, and a trace on a GPU would hold that device in the graph (the models move their
    input to their own device): exports are traced, and checked, on the CPU."""
    tensors = [*model.parameters(), *model.buffers()]
    if all(t.device.type == "cpu" for t in tensors):
        return model
    logger.info(f"Exporting a copy of the model on the CPU (the model is on {tensors[0].device})")
    return copy.deepcopy(model).cpu()


def export_onnx(
    model: nn.Module,
    example: torch.Tensor,
    path: str,
    dynamic_batch: bool = False,
    opset: Optional[int] = None,
    exporter: str = "dynamo",
) -> str:
    """Write ``model`` (in eval mode) to ``path`` as ONNX, traced with ``example``. ``exporter``:
    ``dynamo`` (torch.export based, torch's default) or ``legacy`` (the TorchScript-based one)."""
    require("onnx", "ONNX export")
    wrapper = ExportableModel(on_cpu(model)).eval()
    example = example.cpu()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    kwargs: dict = {"input_names": ["images"], "output_names": ["features"]}
    if opset is not None:
        kwargs["opset_version"] = opset
    if exporter == "dynamo":
        require("onnxscript", "ONNX export")
        if dynamic_batch:
            kwargs["dynamic_shapes"] = {"images": {0: torch.export.Dim("batch", min=1, max=4096)}}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = torch.onnx.export(wrapper, (example,), dynamo=True, **kwargs)
        assert program is not None  # dynamo=True always returns the program
        program.save(path)
    elif exporter == "legacy":
        if dynamic_batch:
            kwargs["dynamic_axes"] = {"images": {0: "batch"}, "features": {0: "batch"}}
        kwargs.setdefault("opset_version", 17)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(wrapper, (example,), path, dynamo=False, **kwargs)
    else:
        raise ValueError(f"exporter must be 'dynamo' or 'legacy', got {exporter!r}")
    return path


def export_torchscript(model: nn.Module, example: torch.Tensor, path: str) -> str:
    """Write ``model`` (in eval mode) to ``path`` as TorchScript, traced with ``example`` (any batch
    size runs: the re-ID models have no batch-dependent control flow)."""
    wrapper = ExportableModel(on_cpu(model)).eval()
    example = example.cpu()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(wrapper, (example,), check_trace=False)
    traced.save(path)
    return path


def load_exported(path: str, fmt: str) -> Callable[[np.ndarray], np.ndarray]:
    """A function running the exported file: float32 images (N x 3 x H x W) -> features."""
    if fmt == "onnx":
        session = onnxruntime_session(path)
        name = session.get_inputs()[0].name
        return lambda images: session.run(None, {name: np.ascontiguousarray(images, np.float32)})[0]
    if fmt == "torchscript":
        module = torch.jit.load(path, map_location="cpu").eval()

        def run(images: np.ndarray) -> np.ndarray:
            with torch.no_grad():
                return module(torch.from_numpy(np.ascontiguousarray(images, np.float32))).numpy()

        return run
    raise ValueError(f"format must be 'onnx' or 'torchscript', got {fmt!r}")


@dataclass
class CheckResult:
    max_abs_diff: float
    max_abs_feature: float
    batch_sizes: tuple[int, ...]
    feature_dim: int

    @property
    def scaled_diff(self) -> float:
        """The largest difference, divided by the largest feature value when that is above 1:
        float32 keeps about 7 significant digits, so features of size 1000 (an untrained deep
        network) cannot agree to 1e-4 in absolute terms, while trained ones (size ~1) must."""
        return self.max_abs_diff / max(1.0, self.max_abs_feature)


def check_export(
    model: nn.Module,
    path: str,
    fmt: str,
    images: torch.Tensor,
    batch_sizes: tuple[int, ...],
    tolerance: float = 1e-4,
) -> CheckResult:
    """Run the exported file on ``images`` (N x 3 x H x W, 0..255) in batches of each size in
    ``batch_sizes`` and compare with ``model`` on the same batches (on the CPU, where the file runs:
    a model on a GPU is compared through a CPU copy, see :func:`on_cpu`); raises :class:`ExportCheckError`
    when :attr:`CheckResult.scaled_diff` is above ``tolerance``."""
    run = load_exported(path, fmt)
    images = images.float().cpu()
    wrapper = ExportableModel(on_cpu(model)).eval()
    worst, largest, dim = 0.0, 0.0, 0
    for size in batch_sizes:
        for start in range(0, len(images) - size + 1, size):
            batch = images[start : start + size]
            with torch.no_grad():  # the same batch through PyTorch: no batch-size-dependent rounding
                expected = wrapper(batch).float().numpy()
            got = run(batch.numpy())
            if got.shape != expected.shape:
                raise ExportCheckError(
                    f"the exported model returned shape {got.shape} for a batch of {size}, "
                    f"PyTorch {expected.shape}"
                )
            worst = max(worst, float(np.abs(got - expected).max()))
            largest, dim = max(largest, float(np.abs(expected).max())), expected.shape[1]
    result = CheckResult(worst, largest, tuple(batch_sizes), int(dim))
    if not result.scaled_diff <= tolerance:  # NaN fails too
        raise ExportCheckError(
            f"{path}: features differ from PyTorch by up to {worst:.3g} (features up to "
            f"{largest:.3g}; scaled difference {result.scaled_diff:.3g} > {tolerance:g}) on "
            f"{len(images)} images; the export is not faithful"
        )
    return result
