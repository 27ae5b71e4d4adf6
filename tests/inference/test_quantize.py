"""int8 static quantization (ONNX Runtime's quantizer) and ``fastreid-export --quantize int8``: a
faithful int8 model, its metrics beside the fp32 model's, the refusal that deletes it, and one-line
errors for bad calibration input."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
import torch
from PIL import Image

from fastreid.cli import export
from fastreid.inference import FeatureExtractor
from fastreid.inference.quantize import (
    MIN_CALIBRATION_IMAGES,
    CalibrationError,
    QuantizationError,
    calibration_batches,
    choose_calibration_files,
    default_reduce_range,
    quantize_int8,
)
from fastreid.utils.platform import forced_platform

# How close int8 features must stay to fp32 ones. An activation quantized to uint8 over its
# calibrated range [0, r] is off by at most r / 510 (half a step), a few tenths of a percent of a
# typical activation; ResNet-18's 20 quantized layers add such errors, mostly independently, so
# the features' relative error should be ~1-5 % (measured: this tiny random model, cosine min
# 0.9997; the trained demo model, 0.9985 min and 0.9992 mean over its 1,602 test images, with 16
# to 1,024 calibration images alike). Cosine 0.99 allows a 14 % relative error
# (cos = 1 / sqrt(1 + e^2)): above what accumulated rounding gives, far below what a broken
# calibration gives (the demo model calibrated on pixels scaled to 0..1 instead of 0..255: cosine
# mean 0.56, min -0.07).
MIN_COSINE = 0.99


def test_calibration_files_are_a_seeded_spread_of_the_source():
    files = [f"img{i:03d}.jpg" for i in range(100)]
    chosen = choose_calibration_files(files, 20, "train")
    assert chosen == choose_calibration_files(files, 20, "train") and len(set(chosen)) == 20
    assert chosen == sorted(chosen) and chosen[0] < "img030.jpg" and chosen[-1] > "img070.jpg"
    with pytest.raises(CalibrationError, match=r"holds 100 images, fewer than the 200 .* --calib-images 100"):
        choose_calibration_files(files, 200, "train")
    with pytest.raises(CalibrationError, match=f"fewer than {MIN_CALIBRATION_IMAGES} images"):
        choose_calibration_files(files, 3, "train")
    with pytest.raises(CalibrationError, match="holds 5 images; calibration needs at least"):
        choose_calibration_files(files[:5], 16, "crops/")


def test_reduce_range_follows_vnni():
    with forced_platform(cpu_flags=frozenset({"avx2", "avx512_vnni"})):
        on_vnni = default_reduce_range()
    with forced_platform(cpu_flags=frozenset({"avx2", "fma"})):
        on_avx2 = default_reduce_range()
    if os.uname().machine in ("x86_64", "AMD64"):
        assert on_vnni == (False, "this CPU has avx512_vnni")
        assert on_avx2 == (True, "this x86 CPU has no VNNI")


def _onnx_file(
    path, nodes: list, initializers: list | None = None, size: tuple = (8, 4), dim: int = 96
) -> str:
    """A hand-made ONNX graph ``images`` (batch x 3 x H x W) -> ``features`` (batch x ``dim``)."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    images = helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", 3, *size])
    features = helper.make_tensor_value_info("features", TensorProto.FLOAT, ["batch", dim])
    graph = helper.make_graph(nodes, "hand_made", [images], [features], initializer=initializers or [])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def test_unreadable_calibration_image_is_named_and_writes_nothing(tmp_path, tiny_model_files):
    """The model's own pre-processing (what fastreid-export calibrates with) on 4 files, one of them
    not a JPEG, for a graph with a convolution to quantize (the error comes from reading the
    calibration batches, whatever the model)."""
    pytest.importorskip("onnxruntime")
    from onnx import helper, numpy_helper

    config_file, weights = tiny_model_files
    preprocess = FeatureExtractor(config_file=config_file, weights=weights, device="cpu").preprocess
    weight = numpy_helper.from_array(np.full((4, 3, 1, 1), 0.01, np.float32), "w")
    nodes = [
        helper.make_node("Conv", ["images", "w"], ["c"]),
        helper.make_node("GlobalAveragePool", ["c"], ["p"]),
        helper.make_node("Flatten", ["p"], ["features"]),
    ]
    fp32 = _onnx_file(tmp_path / "conv.onnx", nodes, [weight], size=(64, 32), dim=4)
    files = []
    for i in range(4):
        path = tmp_path / f"{i}.jpg"
        Image.fromarray(np.full((64, 32, 3), 40 * i, np.uint8)).save(path)
        files.append(str(path))
    (tmp_path / "2.jpg").write_bytes(b"not a jpeg")
    with pytest.raises(CalibrationError, match=r"calibration image unreadable: .*2\.jpg"):
        quantize_int8(fp32, str(tmp_path / "int8.onnx"), calibration_batches(preprocess, files, 2))
    assert not os.path.exists(tmp_path / "int8.onnx") and os.path.exists(fp32)


def test_a_model_without_quantizable_layers_is_refused(tmp_path):
    pytest.importorskip("onnxruntime")
    from onnx import helper

    nodes = [helper.make_node("Relu", ["images"], ["r"]), helper.make_node("Flatten", ["r"], ["features"])]
    path = _onnx_file(tmp_path / "relu.onnx", nodes)
    batches = [np.random.default_rng(i).uniform(0, 255, (2, 3, 8, 4)).astype(np.float32) for i in range(2)]
    with pytest.raises(QuantizationError, match="left every layer of .* in float"):
        quantize_int8(path, str(tmp_path / "int8.onnx"), batches)
    assert not os.path.exists(tmp_path / "int8.onnx")


@pytest.fixture
def export_int8(run_tool, tiny_model_files, synthetic_market_root):
    """``export_int8(output_folder, *args)``: ``fastreid-export --quantize int8`` (what
    tools/deploy/export.py calls; tests/inference/test_export.py runs the script) of the tiny model
    in this process, on the synthetic Market-1501, one torch thread as OMP_NUM_THREADS=1 gives a
    process, a fresh interpreter's logging."""

    def call(tmp_path, *args):
        config_file, weights = tiny_model_files
        argv = ["--config-file", config_file, "--format", "onnx", "--dynamic-batch"]
        argv += ["--output", tmp_path / "model.onnx", "--quantize", "int8", *args]
        argv += ["MODEL.WEIGHTS", weights, "DATASETS.NAMES", '("Market1501",)', "TEST.IMS_PER_BATCH", "32"]
        env = {"OMP_NUM_THREADS": "1", "FASTREID_DATASETS": synthetic_market_root}
        return run_tool(export.run, *argv, env=env)

    return call


@pytest.mark.slow
def test_export_tool_writes_int8_and_prints_metrics_beside_fp32(tmp_path, export_int8):
    """The int8 model of the tiny ResNet-18, calibrated on 32 training images: every convolution
    quantized, its features faithful to the fp32 model's on the held-out query and gallery images
    (the tool's cosine line), its metrics printed beside fp32's."""
    # the tiny model on the tiny query set moves mAP by a few points with int8 rounding, by how
    # much depends on the CPU's int8 kernels (VNNI or not): the threshold is the next test's
    proc = export_int8(tmp_path, "--calib-images", "32", "--max-map-drop", "100")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "int8 export: " in out and "MinMax on 32 images" in out
    assert "20/20 Conv layers quantized" in out  # every convolution of the ResNet-18 runs in int8
    assert "accuracy on Market1501" in out
    rows = {m[0]: m[1].split() for m in re.findall(r"^  (fp32|int8) +([\d.% ]+)$", out, re.MULTILINE)}
    assert len(rows["fp32"]) == len(rows["int8"]) == 5, out  # Rank-1, Rank-5, Rank-10, mAP, mINP
    cosine = re.search(r"int8 features vs fp32: cosine min ([\d.]+), mean ([\d.]+)", out)
    assert cosine, out
    low, mean = float(cosine[1]), float(cosine[2])
    assert low >= MIN_COSINE and mean >= low, out
    assert "kept " in out
    assert os.path.getsize(tmp_path / "model_int8.onnx") > 1000 and os.path.exists(tmp_path / "model.onnx")


@pytest.mark.slow
def test_export_tool_refuses_an_int8_model_that_loses_accuracy(tmp_path, export_int8):
    """Any mAP change is more than -100 points below fp32: the threshold forces the refusal. The
    fp32 model comes from the legacy (TorchScript-based) exporter, a tenth of the dynamo one's CPU
    (the previous test exports with dynamo), so that --exporter legacy runs too."""
    proc = export_int8(tmp_path, "--calib-images", "16", "--max-map-drop", "-100", "--exporter", "legacy")
    assert proc.returncode == 1
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("AccuracyDropError: the int8 model loses ")
    assert "more than --max-map-drop -100: deleted" in proc.stderr and "is kept" in proc.stderr
    assert "  int8 " in proc.stdout  # the metrics were printed before the refusal
    assert not os.path.exists(tmp_path / "model_int8.onnx") and os.path.exists(tmp_path / "model.onnx")


def test_export_tool_too_few_calibration_images_is_one_line(tmp_path, export_int8):
    crops = tmp_path / "crops"
    crops.mkdir()
    for i in range(5):
        Image.fromarray(np.full((64, 32, 3), 30 * i, np.uint8)).save(crops / f"{i}.jpg")
    proc = export_int8(tmp_path, "--calib-input", crops, "--calib-images", "16")
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        f"CalibrationError: {crops} holds 5 images; calibration needs at least {MIN_CALIBRATION_IMAGES}: pass a "
        "folder, glob or list of more training images with --calib-input"
    )
    assert not os.path.exists(tmp_path / "model.onnx")  # refused before any work


def test_calibration_batches_of_a_fixed_batch_model_are_full():
    def preprocess(files):
        return torch.zeros(len(files), 3, 4, 2, dtype=torch.uint8)

    batches = list(calibration_batches(preprocess, [f"{i}.jpg" for i in range(10)], 4, fixed_batch=True))
    assert [len(b) for b in batches] == [4, 4] and batches[0].dtype == np.float32
    assert [len(b) for b in calibration_batches(preprocess, [f"{i}.jpg" for i in range(10)], 4)] == [4, 4, 2]
    with pytest.raises(CalibrationError, match="do not fill one batch of 4"):
        list(calibration_batches(preprocess, ["a.jpg"], 4, fixed_batch=True))
