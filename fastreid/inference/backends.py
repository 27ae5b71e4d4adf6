"""The engines that turn a transformed batch into features, and the one place that picks one.

- ``torch``: the model itself (:class:`fastreid.engine.DefaultPredictor`: the config's
  architecture with ``MODEL.WEIGHTS`` loaded), on ``MODEL.DEVICE``.
- ``onnxruntime``: a file written by ``fastreid-export --format onnx`` (fp32, or int8 from
  ``--quantize int8``), run by ONNX Runtime on the CPU.
- ``openvino``: the same ONNX file, compiled by OpenVINO for the CPU (``pip install openvino``).

Every backend is called on what the test transforms give (N x 3 x H x W, RGB, uint8 or float on
0..255) and returns N x D float32 features on the CPU. The exported graph holds the
``MODEL.PIXEL_MEAN/STD`` normalisation, as the eager model does, so the exported backends feed the
same pixels and nothing is normalised twice or not at all. Decoding, resizing, batching and
flip-averaging stay in :class:`fastreid.inference.FeatureExtractor`, identical for every backend.

CPU threads of the exported backends come from the project's thread decision
(:func:`fastreid.utils.threads.intra_op_threads`: ``OMP_NUM_THREADS``, else the CPUs this process
may use), and their worker threads sleep instead of spinning when the process waits passively
(``OMP_WAIT_POLICY=PASSIVE``, the default :mod:`fastreid.utils.threads` sets), so that the
data-loading workers keep their share of the cores.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Callable, ClassVar, Optional

import numpy as np
import torch

from fastreid.config import CfgNode
from fastreid.engine.defaults import DefaultPredictor
from fastreid.utils.errors import UserError
from fastreid.utils.extras import require
from fastreid.utils.threads import intra_op_threads

__all__ = [
    "BACKENDS",
    "BackendError",
    "FeatureBackend",
    "OnnxRuntimeBackend",
    "OpenVinoBackend",
    "TorchBackend",
    "backend_device",
    "create_backend",
    "onnxruntime_session",
]

logger = logging.getLogger(__name__)

BACKENDS = ("torch", "onnxruntime", "openvino")
#: Files the exported backends read (``fastreid-export`` writes ``.onnx``; OpenVINO also reads its IR).
EXPORTED_SUFFIXES = {"onnxruntime": (".onnx",), "openvino": (".onnx", ".xml")}


class BackendError(UserError, ValueError):
    """A backend that cannot run as asked: unknown name, missing or mismatched model file, device."""


class FeatureBackend:
    """``backend(images) -> features``: N x 3 x H x W (0..255) -> N x D float32 on the CPU."""

    name: ClassVar[str] = ""
    cfg: CfgNode

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    def describe(self) -> str:
        """One line for the log: the engine, the model file and its settings."""
        return self.name


class TorchBackend(FeatureBackend):
    """The eager PyTorch model: ``DefaultPredictor(cfg)`` (weights from ``MODEL.WEIGHTS``)."""

    name = "torch"

    def __init__(self, cfg: CfgNode) -> None:
        self.predictor = DefaultPredictor(cfg)
        self.cfg = self.predictor.cfg

    @property
    def model(self) -> torch.nn.Module:
        return self.predictor.model

    @property
    def device(self) -> torch.device:
        return self.predictor.device

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        return self.predictor(images)

    def describe(self) -> str:
        return f"torch ({self.cfg.MODEL.WEIGHTS or 'random weights'}, {self.device})"


def _passive_wait() -> bool:
    """The process's OpenMP threads sleep when idle (fastreid's default, or the user's choice)."""
    return os.environ.get("OMP_WAIT_POLICY", "").strip().upper() == "PASSIVE"


def onnxruntime_session(path: str, threads: Optional[int] = None) -> Any:
    """An ONNX Runtime CPU session of ``path``: ``threads`` intra-op threads (default: the project's
    thread decision), one inter-op thread (the re-ID graphs are a chain: nothing to run in
    parallel), every graph optimisation, and no spinning of idle threads when the process's wait
    policy is passive."""
    ort = require("onnxruntime", "Running an exported ONNX model", "deploy")
    options = ort.SessionOptions()
    options.intra_op_num_threads = int(threads or intra_op_threads())
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if _passive_wait():
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime raises its own exception types for unreadable models
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise BackendError(f"ONNX Runtime cannot load {path}: {first}") from e


class _ExportedBackend(FeatureBackend):
    """What the exported backends share: the model file's checks, its input size against
    ``INPUT.SIZE_TEST``, and batches cut to a fixed batch size when the graph has one."""

    def __init__(self, cfg: CfgNode, model_file: str, threads: Optional[int] = None) -> None:
        self.cfg = cfg
        self.model_file = model_file
        self.threads = int(threads or intra_op_threads())
        self.input_name, shape = self._load()
        self.fixed_batch = shape[0] if isinstance(shape[0], int) and shape[0] > 0 else None
        self.input_size = (shape[2], shape[3]) if len(shape) == 4 else None
        size_test = tuple(int(v) for v in cfg.INPUT.SIZE_TEST)
        h, w = self.input_size or (None, None)
        if isinstance(h, int) and isinstance(w, int) and (h, w) != size_test:
            raise BackendError(
                f"{model_file} takes {h}x{w} images but the config's INPUT.SIZE_TEST is "
                f"{size_test[0]}x{size_test[1]}: use the config the model was exported with"
            )
        self._check_output_shape((size_test[0], size_test[1]))

    def _check_output_shape(self, size: tuple[int, int]) -> None:
        """One batch of blank images through the engine at start-up: each image must give one row
        of features. An engine that reads the file but computes something else (OpenVINO on ONNX
        Runtime's int8 QDQ graph returned 1 x 512 x 512 x 1 for one image) is refused here rather
        than giving wrong features."""
        batch = self.fixed_batch or 2
        try:
            out = np.asarray(self._run(np.zeros((batch, 3, size[0], size[1]), dtype=np.float32)))
        except Exception as e:  # the engines raise their own exception types
            first = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
            raise BackendError(
                f"{self.name} cannot run {self.model_file} on a batch of {batch} images ({first.strip()}); "
                "run it with another --backend (onnxruntime runs every file fastreid-export writes)"
            ) from e
        if out.ndim != 2 or out.shape[0] != batch:
            raise BackendError(
                f"{self.name} computes an output of shape {tuple(out.shape)} from {batch} images with "
                f"{self.model_file} (expected {batch} x D features): this engine cannot run this file; "
                "run it with another --backend (onnxruntime runs every file fastreid-export writes)"
            )

    def _load(self) -> tuple[str, list]:
        """Open the model; returns its input's name and shape (ints, or names for dynamic axes)."""
        raise NotImplementedError

    def _run(self, images: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        x = np.ascontiguousarray(images.detach().to("cpu", torch.float32).numpy())
        b = self.fixed_batch
        if b is None or len(x) == b:
            return torch.from_numpy(np.asarray(self._run(x), dtype=np.float32))
        outputs = []
        for start in range(0, len(x), b):  # a fixed-batch graph: full batches, the last one padded
            chunk = x[start : start + b]
            if len(chunk) < b:
                chunk = np.concatenate([chunk, np.repeat(chunk[-1:], b - len(chunk), axis=0)])
            outputs.append(np.asarray(self._run(chunk), dtype=np.float32)[: min(b, len(x) - start)])
        return torch.from_numpy(np.concatenate(outputs))

    def describe(self) -> str:
        batch = f"fixed batch {self.fixed_batch}" if self.fixed_batch else "any batch size"
        return f"{self.name} ({self.model_file}, {batch}, {self.threads} CPU thread(s))"


class OnnxRuntimeBackend(_ExportedBackend):
    """An exported ``.onnx`` file (fp32 or int8 QDQ) in an ONNX Runtime CPU session."""

    name = "onnxruntime"

    def _load(self) -> tuple[str, list]:
        self.session = onnxruntime_session(self.model_file, self.threads)
        first = self.session.get_inputs()[0]
        return first.name, list(first.shape)

    def _run(self, images: np.ndarray) -> np.ndarray:
        return self.session.run(None, {self.input_name: images})[0]


class OpenVinoBackend(_ExportedBackend):
    """An exported ``.onnx`` file (or OpenVINO IR ``.xml``) compiled by OpenVINO for the CPU, in
    fp32 (``INFERENCE_PRECISION_HINT f32``: features as the eager model's, not bf16 where the CPU
    has it); an int8 QDQ model runs in int8."""

    name = "openvino"

    def _load(self) -> tuple[str, list]:
        ov = require("openvino", "The openvino backend", "openvino")
        core = ov.Core()
        try:
            model = core.read_model(self.model_file)
        except RuntimeError as e:
            raise BackendError(
                f"OpenVINO cannot read {self.model_file}: {str(e).strip().splitlines()[0]}"
            ) from e
        config = {
            "INFERENCE_NUM_THREADS": self.threads,
            "INFERENCE_PRECISION_HINT": "f32",
            "PERFORMANCE_HINT": "LATENCY",
        }
        self.compiled = core.compile_model(model, "CPU", config)
        first = model.inputs[0]
        shape = [d.get_length() if d.is_static else "dynamic" for d in first.get_partial_shape()]
        return first.get_any_name(), shape

    def _run(self, images: np.ndarray) -> np.ndarray:
        return self.compiled(images)[0]


_EXPORTED: dict[str, Callable[..., _ExportedBackend]] = {
    "onnxruntime": OnnxRuntimeBackend,
    "openvino": OpenVinoBackend,
}


def _check_name(name: str) -> None:
    if name not in BACKENDS:
        raise BackendError(f"backend {name!r}: expected one of {', '.join(BACKENDS)}")


def backend_device(name: str, device: Optional[str]) -> Optional[str]:
    """The device to build the config with: the torch backend's own choice (``auto``: CUDA, MPS,
    CPU); the exported backends run on the CPU, which ``auto`` then means."""
    _check_name(name)
    if name == "torch" or device is None:
        return device
    if device in ("auto", "cpu"):
        return "cpu"
    raise BackendError(
        f"the {name} backend runs on the CPU here, not {device!r}: use --device cpu (or auto), "
        "or --backend torch for the GPU"
    )


def exported_model_file(name: str, cfg: CfgNode, model_file: Optional[str]) -> str:
    """The file an exported backend runs: ``model_file``, else ``MODEL.WEIGHTS`` when it names an
    exported model; it must exist."""
    suffixes = EXPORTED_SUFFIXES[name]
    path = model_file or (cfg.MODEL.WEIGHTS if str(cfg.MODEL.WEIGHTS).lower().endswith(suffixes) else "")
    if not path:
        raise BackendError(
            f"the {name} backend runs an exported model: pass it (fastreid-extract --model FILE.onnx; "
            "FeatureExtractor(model_file=...)), made by fastreid-export --format onnx"
        )
    if not os.path.isfile(path):
        raise BackendError(
            f"exported model {path!r}: no such file (make it with fastreid-export --format onnx)"
        )
    if not path.lower().endswith(suffixes):
        raise BackendError(f"the {name} backend reads {' or '.join(suffixes)} files, not {path!r}")
    return path


def create_backend(
    name: str, cfg: CfgNode, model_file: Optional[str] = None, threads: Optional[int] = None
) -> FeatureBackend:
    """The backend ``name`` (one of :data:`BACKENDS`) for ``cfg``: ``torch`` builds the model and
    loads ``MODEL.WEIGHTS``; ``onnxruntime`` / ``openvino`` run ``model_file`` (default
    ``MODEL.WEIGHTS`` when it is an exported file) with ``threads`` CPU threads."""
    _check_name(name)
    if name == "torch":
        if model_file:
            raise BackendError(
                "the torch backend loads MODEL.WEIGHTS (a checkpoint); an exported model file is run "
                "with --backend onnxruntime or openvino"
            )
        backend: FeatureBackend = TorchBackend(cfg)
    else:
        backend = _EXPORTED[name](cfg, exported_model_file(name, cfg, model_file), threads)
    logger.info("Feature backend: %s", backend.describe())
    return backend
