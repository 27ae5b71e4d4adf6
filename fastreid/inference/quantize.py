"""Static int8 quantization of an exported ONNX model with ONNX Runtime's quantizer.

``quantize_int8(fp32.onnx, int8.onnx, batches)`` runs ONNX Runtime's pre-processing (shape
inference and graph optimisation, as its documentation asks before quantizing), then
``onnxruntime.quantization.quantize_static``: QDQ format, weights int8 per output channel,
activations uint8 with ranges calibrated by MinMax on ``batches`` (the model's own test
pre-processing of real images: N x 3 x H x W float32 on 0..255). MinMax keeps only each tensor's
running minimum and maximum, so the calibration's memory does not grow with the number of images.

Activations are uint8 and weights int8 (U8S8): ONNX Runtime's CPU kernels for that pair are its fast
ones on x86 (measured here: S8S8 QDQ ran no faster than fp32, U8S8 about 3x faster). On x86 CPUs
without VNNI those kernels add pairs of u8 x s8 products in 16 bits, which can saturate; ONNX
Runtime's advice is then to quantize weights to 7 bits (``reduce_range``), which
:func:`default_reduce_range` decides from this CPU's flags.

Whether the int8 model is good enough is not decided here: ``fastreid-export --quantize int8``
compares its retrieval metrics with the fp32 model's (:mod:`fastreid.cli.export`).
"""

from __future__ import annotations

import logging
import os
import platform
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np
import torch

from fastreid.data.data_utils import ImageReadError
from fastreid.utils.errors import UserError
from fastreid.utils.extras import require
from fastreid.utils.platform import cpu_flags

__all__ = [
    "MIN_CALIBRATION_IMAGES",
    "QUANTIZED_LAYER_TYPES",
    "AccuracyDropError",
    "CalibrationError",
    "QuantizationError",
    "QuantizationReport",
    "calibration_batches",
    "choose_calibration_files",
    "default_reduce_range",
    "quantize_int8",
]

logger = logging.getLogger(__name__)

#: Fewer calibration images than this give activation ranges from too small a sample to trust.
MIN_CALIBRATION_IMAGES = 16
#: The layers that carry the arithmetic (and the speed-up) of an int8 model.
QUANTIZED_LAYER_TYPES = ("Conv", "Gemm", "MatMul")
_VNNI_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")


class CalibrationError(UserError, ValueError):
    """Calibration images that are missing, too few or unreadable."""


class QuantizationError(UserError, RuntimeError):
    """ONNX Runtime's quantizer cannot quantize the model (or quantizes none of its layers)."""


class AccuracyDropError(UserError, RuntimeError):
    """The int8 model's mAP is below the fp32 model's by more than allowed."""


@dataclass
class QuantizationReport:
    """What :func:`quantize_int8` did."""

    path: str
    calibration_images: int
    seconds: float
    reduce_range: bool
    reduce_range_reason: str
    #: layer type -> (layers in int8, layers of that type in the model)
    layers: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def quantized_layers(self) -> int:
        return sum(q for q, _ in self.layers.values())

    def describe(self) -> str:
        layers = ", ".join(f"{q}/{n} {op}" for op, (q, n) in sorted(self.layers.items()))
        weights = "7-bit weights (reduce_range: " if self.reduce_range else "8-bit weights ("
        return (
            f"int8 (QDQ, per-channel int8 weights, uint8 activations, MinMax on {self.calibration_images} "
            f"images): {layers} layers quantized; {weights}{self.reduce_range_reason}); {self.seconds:.1f} s"
        )


def default_reduce_range() -> tuple[bool, str]:
    """``(reduce_range, why)``: 7-bit weights on an x86 CPU without VNNI (ONNX Runtime's advice
    against u8 x s8 saturation there), 8-bit elsewhere."""
    machine = platform.machine().lower()
    if machine not in ("x86_64", "amd64", "i386", "i686", "x86"):
        return False, f"{machine or 'this'} CPU"
    flags = cpu_flags()
    vnni = [f for f in _VNNI_FLAGS if f in flags]
    if vnni:
        return False, f"this CPU has {vnni[0]}"
    if not flags:
        return True, "cannot tell whether this x86 CPU has VNNI"
    return True, "this x86 CPU has no VNNI"


def choose_calibration_files(files: Sequence[str], count: int, source: str, seed: int = 0) -> list[str]:
    """``count`` of ``files``, drawn without replacement by a seeded generator (spread over the whole
    source, the same draw on every run) and kept in the source's order. ``source`` names where they
    came from, for the error when there are too few."""
    if count < MIN_CALIBRATION_IMAGES:
        raise CalibrationError(
            f"--calib-images {count}: calibrating on fewer than {MIN_CALIBRATION_IMAGES} images gives "
            "activation ranges from too small a sample; use a few hundred (default 256)"
        )
    if len(files) < count:
        raise CalibrationError(
            f"{source} holds {len(files)} images, fewer than the {count} calibration images asked for: "
            f"pass --calib-images {max(len(files), MIN_CALIBRATION_IMAGES)} or more images (--calib-input)"
            if len(files) >= MIN_CALIBRATION_IMAGES
            else f"{source} holds {len(files)} images; calibration needs at least {MIN_CALIBRATION_IMAGES}: "
            "pass a folder, glob or list of more training images with --calib-input"
        )
    chosen = np.random.default_rng(seed).choice(len(files), count, replace=False)
    return [files[i] for i in sorted(chosen.tolist())]


def calibration_batches(
    preprocess: Callable[[Sequence[str]], torch.Tensor],
    files: Sequence[str],
    batch_size: int,
    fixed_batch: bool = False,
) -> Iterator[np.ndarray]:
    """``files`` read and transformed by ``preprocess`` (the model's test pre-processing), as float32
    batches of ``batch_size``; with ``fixed_batch`` (a graph exported for one batch size) only
    full batches. An unreadable image is a :class:`CalibrationError` naming it."""
    end = len(files) - len(files) % batch_size if fixed_batch else len(files)
    if end == 0:
        raise CalibrationError(
            f"{len(files)} calibration images do not fill one batch of {batch_size}, the exported model's "
            "fixed batch size: pass more images (--calib-images) or export with --dynamic-batch"
        )
    for start in range(0, end, batch_size):
        try:
            images = preprocess(files[start : min(end, start + batch_size)])
        except ImageReadError as e:
            raise CalibrationError(
                f"calibration image unreadable: {_first_line(e)}; remove it or pass other images with --calib-input"
            ) from e
        yield images.to(torch.float32).numpy()


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _nodes_after_last_layer(model: Any) -> list[str]:
    """The nodes after the graph's last Conv / Gemm / MatMul (its nodes are in topological order):
    the head's pooling, BN neck and reshapes. They cost next to nothing, and in float the features
    keep their precision instead of being rounded to 256 levels shared by all their dimensions."""
    nodes = list(model.graph.node)
    last = max((i for i, n in enumerate(nodes) if n.op_type in QUANTIZED_LAYER_TYPES), default=len(nodes))
    tail = nodes[last + 1 :]
    if any(not n.name for n in tail):
        logger.warning("Some nodes after the last layer have no name: they are quantized with the rest")
    return [n.name for n in tail if n.name]


def _layer_counts(fp32: Any, int8: Any) -> dict[str, tuple[int, int]]:
    """For each layer type of :data:`QUANTIZED_LAYER_TYPES` in the model: how many of them read a
    dequantized weight in the int8 graph, and how many the fp32 graph has."""
    dequantized = {
        out for node in int8.graph.node if node.op_type == "DequantizeLinear" for out in node.output
    }
    total = Counter(n.op_type for n in fp32.graph.node if n.op_type in QUANTIZED_LAYER_TYPES)
    done = Counter(
        n.op_type
        for n in int8.graph.node
        if n.op_type in QUANTIZED_LAYER_TYPES and len(n.input) > 1 and n.input[1] in dequantized
    )
    return {op: (done.get(op, 0), count) for op, count in total.items()}


def quantize_int8(
    fp32_path: str,
    int8_path: str,
    batches: Iterable[np.ndarray],
    *,
    reduce_range: Optional[bool] = None,
    per_channel: bool = True,
) -> QuantizationReport:
    """Write the static int8 (QDQ) quantization of ``fp32_path`` to ``int8_path``, calibrated on
    ``batches`` (float32 N x 3 x H x W on 0..255, each of a batch size the model accepts).
    ``reduce_range`` None: :func:`default_reduce_range`. The file appears only when quantization
    succeeded. Raises :class:`QuantizationError` when ONNX Runtime's quantizer fails or quantizes
    no layer, and whatever :class:`UserError` reading ``batches`` raises."""
    onnx = require("onnx", "int8 quantization", "deploy")
    quantization = require("onnxruntime.quantization", "int8 quantization", "deploy")
    from onnxruntime.quantization.shape_inference import quant_pre_process  # part of the package above

    if reduce_range is None:
        reduce_range, why = default_reduce_range()
    else:
        why = "asked for" if reduce_range else "not asked for"
    fp32 = onnx.load(fp32_path, load_external_data=False)
    input_name = fp32.graph.input[0].name
    counted = [0]

    def feeds() -> Iterator[dict[str, np.ndarray]]:
        for batch in batches:
            counted[0] += len(batch)
            yield {input_name: np.ascontiguousarray(batch, dtype=np.float32)}

    class Reader(quantization.CalibrationDataReader):  # type: ignore[name-defined]  # ORT's reader over feeds()
        def __init__(self) -> None:
            self.feeds = feeds()

        def get_next(self) -> Optional[dict[str, np.ndarray]]:
            return next(self.feeds, None)

    start = time.perf_counter()
    folder = os.path.dirname(os.path.abspath(int8_path))
    os.makedirs(folder, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".quantize-", dir=folder) as tmp:
        prepared, quantized = os.path.join(tmp, "prepared.onnx"), os.path.join(tmp, "int8.onnx")
        try:
            quant_pre_process(fp32_path, prepared)
            head = _nodes_after_last_layer(onnx.load(prepared, load_external_data=False))
            quantization.quantize_static(
                prepared,
                quantized,
                Reader(),
                nodes_to_exclude=head,
                quant_format=quantization.QuantFormat.QDQ,
                per_channel=per_channel,
                reduce_range=reduce_range,
                activation_type=quantization.QuantType.QUInt8,
                weight_type=quantization.QuantType.QInt8,
                calibrate_method=quantization.CalibrationMethod.MinMax,
            )
        except UserError:
            raise
        except Exception as e:  # the quantizer raises plain exceptions (ValueError, onnx's, ORT's)
            raise QuantizationError(
                f"ONNX Runtime's quantizer failed on {fp32_path}: {type(e).__name__}: {_first_line(e)}; "
                "the fp32 model is unaffected (use it, or try another opset or --exporter legacy)"
            ) from e
        layers = _layer_counts(fp32, onnx.load(quantized, load_external_data=False))
        report = QuantizationReport(
            int8_path, counted[0], time.perf_counter() - start, bool(reduce_range), why, layers
        )
        if report.quantized_layers == 0:
            found = ", ".join(f"{n} {op}" for op, (_, n) in sorted(layers.items())) or "none"
            raise QuantizationError(
                f"ONNX Runtime's quantizer left every layer of {fp32_path} in float (layers of "
                f"{'/'.join(QUANTIZED_LAYER_TYPES)} found: {found}): there is nothing to run in int8; "
                "use the fp32 model"
            )
        os.replace(quantized, int8_path)
    logger.info("%s -> %s", report.describe(), int8_path)
    return report
