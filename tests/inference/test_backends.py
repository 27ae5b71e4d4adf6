"""The exported backends give the torch backend's features from the same images: same decoding,
resizing, batching and flip-averaging, and the pixel normalisation inside the ONNX graph."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
from PIL import Image

from fastreid.cli import extract
from fastreid.inference import FeatureExtractor
from fastreid.inference.backends import BackendError, backend_device, create_backend
from fastreid.utils.extras import MissingExtraError

# float32 keeps 24 bits (6e-8 relative). ONNX Runtime's kernels and PyTorch's (oneDNN) sum the
# convolutions' terms (up to 4,608 of them, 20 layers deep) in other orders, which moves a feature
# by ~1e-7 of the largest one (measured ~1e-7 here); 1e-5 of the largest feature leaves two orders
# of magnitude for other CPUs' kernels while a wrong pre-processing (normalised twice, BGR, another
# resize) moves features by tens of percent.
RELATIVE_TOLERANCE = 1e-5
# the exported graphs compute in float32; so must the eager model they are compared with (MODEL.PRECISION
# auto is bfloat16 on a CPU with native bfloat16, ~1e-2 away)
FP32 = ["MODEL.PRECISION", "fp32"]


def assert_same_features(got: torch.Tensor, expected: torch.Tensor) -> None:
    got, expected = got.double(), expected.double()
    assert got.shape == expected.shape
    scale = float(expected.abs().max())
    assert scale > 0
    worst = float((got - expected).abs().max())
    assert worst <= RELATIVE_TOLERANCE * scale, f"max |difference| {worst:.3g} for features up to {scale:.3g}"


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> list[str]:
    """JPEG and PNG files of other sizes than the model's, so the resize is part of the comparison."""
    folder = tmp_path_factory.mktemp("backend_images")
    rng = np.random.default_rng(5)
    paths = []
    for i in range(11):
        h, w = (int(v) for v in rng.integers(40, 140, 2))
        path = folder / f"{i:03d}.{'jpg' if i % 2 else 'png'}"
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(path)
        paths.append(str(path))
    return paths


@pytest.fixture(scope="module")
def exported(tmp_path_factory, tiny_model_files, tiny_onnx) -> dict[str, str]:
    """The tiny model exported to ONNX with a dynamic batch and with a fixed batch of 4."""
    from fastreid.inference.export import export_onnx

    config_file, weights = tiny_model_files
    model = FeatureExtractor(config_file=config_file, weights=weights, device="cpu").model
    example = torch.rand(4, 3, 64, 32) * 255
    fixed = export_onnx(model, example, str(tmp_path_factory.mktemp("backend_onnx") / "fixed4.onnx"))
    return {"dynamic": tiny_onnx, "fixed4": fixed}


@pytest.mark.parametrize("flip", [False, True])
def test_onnxruntime_features_equal_torch_features(tiny_model_files, exported, images, flip):
    config_file, weights = tiny_model_files
    opts = ["TEST.FLIP.ENABLED", flip, "TEST.IMS_PER_BATCH", 4]
    eager = FeatureExtractor(config_file=config_file, weights=weights, device="cpu", opts=opts + FP32)
    onnx = FeatureExtractor(
        config_file=config_file,
        device="cpu",
        opts=opts,
        backend="onnxruntime",
        model_file=exported["dynamic"],
    )
    assert onnx.backend.name == "onnxruntime" and onnx.backend.fixed_batch is None
    assert_same_features(onnx(images), eager(images))  # paths: through the loader
    arrays = [np.asarray(Image.open(p).convert("RGB")) for p in images[:3]]
    assert_same_features(onnx(arrays), eager(arrays))  # in memory: through preprocess


def test_a_fixed_batch_graph_runs_any_number_of_images(tiny_model_files, exported, images):
    """11 images through a graph exported for batches of 4: two full batches and a padded one."""
    config_file, weights = tiny_model_files
    eager = FeatureExtractor(config_file=config_file, weights=weights, device="cpu", opts=FP32)
    fixed = FeatureExtractor(
        config_file=config_file, device="cpu", backend="onnxruntime", model_file=exported["fixed4"]
    )
    assert fixed.backend.fixed_batch == 4
    assert_same_features(fixed(images), eager(images))


def test_exported_model_of_another_input_size_is_refused(tiny_model_files, exported):
    config_file, _ = tiny_model_files
    with pytest.raises(BackendError, match=r"takes 64x32 images but the config's INPUT.SIZE_TEST is 96x48"):
        FeatureExtractor(
            config_file=config_file,
            device="cpu",
            opts=["INPUT.SIZE_TEST", [96, 48]],
            backend="onnxruntime",
            model_file=exported["dynamic"],
        )


def test_backend_choice_errors(tiny_model_files, tmp_path):
    from fastreid.config import get_cfg

    cfg = get_cfg()
    with pytest.raises(BackendError, match="expected one of torch, onnxruntime, openvino"):
        create_backend("tensorrt", cfg)
    with pytest.raises(BackendError, match="pass it .*--model"):
        create_backend("onnxruntime", cfg)
    with pytest.raises(BackendError, match="no such file"):
        create_backend("onnxruntime", cfg, str(tmp_path / "missing.onnx"))
    with pytest.raises(BackendError, match="loads MODEL.WEIGHTS"):
        create_backend("torch", cfg, "model.onnx")
    assert backend_device("onnxruntime", "auto") == "cpu" and backend_device("torch", "auto") == "auto"
    with pytest.raises(BackendError, match="runs on the CPU here"):
        backend_device("onnxruntime", "cuda")


def test_a_missing_engine_names_its_extra(monkeypatch, exported, tiny_model_files):
    config_file, _ = tiny_model_files
    monkeypatch.setitem(sys.modules, "openvino", None)  # what an absent package looks like to import
    with pytest.raises(MissingExtraError, match=r"'openvino' extra: pip install \"fastreid\[openvino\]\""):
        FeatureExtractor(
            config_file=config_file, device="cpu", backend="openvino", model_file=exported["dynamic"]
        )


@pytest.fixture
def extract_tool(run_tool):
    """``extract_tool(config_file, weights, images, output, *extra)``: fastreid-extract (what
    tools/extract_features.py calls; tests/inference/test_extract_cli.py runs the script) in this
    process, one torch thread as OMP_NUM_THREADS=1 gives a process, a fresh interpreter's logging."""

    def call(config_file, weights, images, output, *extra):
        argv = [
            "--config-file",
            config_file,
            "--input",
            *images,
            "--output",
            output,
            "--device",
            "cpu",
            *extra,
        ]
        argv += ["MODEL.WEIGHTS", weights, *FP32]
        return run_tool(extract.run, *argv, env={"OMP_NUM_THREADS": "1"})

    return call


def test_extract_tool_onnxruntime_backend_equals_torch_backend(
    tmp_path, tiny_model_files, exported, images, extract_tool
):
    config_file, weights = tiny_model_files
    torch_run = extract_tool(config_file, weights, images, tmp_path / "torch", "--backend", "torch")
    assert torch_run.returncode == 0, torch_run.stderr
    onnx_run = extract_tool(
        config_file,
        weights,
        images,
        tmp_path / "ort",
        "--backend",
        "onnxruntime",
        "--model",
        exported["dynamic"],
    )
    assert onnx_run.returncode == 0, onnx_run.stderr
    for name in ("files.txt",):
        assert (tmp_path / "torch" / name).read_text() == (tmp_path / "ort" / name).read_text()
    expected = torch.from_numpy(np.load(tmp_path / "torch" / "features.npy"))
    assert_same_features(torch.from_numpy(np.load(tmp_path / "ort" / "features.npy")), expected)
    # resuming the folder with another exported model is refused, naming what changed
    other = extract_tool(
        config_file,
        weights,
        images,
        tmp_path / "ort",
        "--backend",
        "onnxruntime",
        "--model",
        exported["fixed4"],
    )
    assert other.returncode == 1 and "other model" in other.stderr


def test_extract_tool_without_the_engine_is_one_line(
    tmp_path, tiny_model_files, exported, images, extract_tool, monkeypatch
):
    monkeypatch.setitem(sys.modules, "openvino", None)  # what an absent package looks like to import
    config_file, weights = tiny_model_files
    proc = extract_tool(
        config_file,
        weights,
        images[:2],
        tmp_path / "out",
        "--backend",
        "openvino",
        "--model",
        exported["dynamic"],
    )
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        "MissingExtraError: The openvino backend needs the 'openvino' package of the 'openvino' extra: "
        'pip install "fastreid[openvino]" (in a checkout: pip install -e ".[openvino]")'
    )


def test_openvino_features_equal_torch_features(tiny_model_files, exported, images):
    """OpenVINO compiles the same ONNX file (fp32 inference hint): the eager model's features."""
    config_file, weights = tiny_model_files
    eager = FeatureExtractor(config_file=config_file, weights=weights, device="cpu", opts=FP32)
    ov = FeatureExtractor(
        config_file=config_file, device="cpu", backend="openvino", model_file=exported["dynamic"]
    )
    assert ov.backend.name == "openvino"
    assert_same_features(ov(images), eager(images))


def test_an_engine_that_computes_another_shape_is_refused_at_start(tiny_model_files, tmp_path):
    """An engine that reads a file but gives something other than one feature row per image (as
    OpenVINO 2026 did with ONNX Runtime's int8 QDQ graph of the bagtricks head) must not produce
    features: the backend is refused when it is created, naming the file."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    config_file, _ = tiny_model_files
    # images N x 3 x 64 x 32 -> N x 3 x 64 (a mean over the width): not N x D
    graph = helper.make_graph(
        [helper.make_node("ReduceMean", ["images"], ["features"], axes=[3], keepdims=0)],
        "wrong_shape",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["N", 3, 64, 32])],
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["N", 3, 64])],
    )
    path = tmp_path / "wrong.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    with pytest.raises(BackendError, match=r"output of shape \(2, 3, 64\) from 2 images with .*wrong.onnx"):
        FeatureExtractor(config_file=config_file, device="cpu", backend="onnxruntime", model_file=str(path))
