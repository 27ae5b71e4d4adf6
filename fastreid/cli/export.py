"""``tools/deploy/export.py`` (``fastreid-export``): ONNX or TorchScript, checked on real images.

    python tools/deploy/export.py --config-file logs/demo/config.yaml --format onnx --dynamic-batch \
        --output logs/demo/model.onnx MODEL.WEIGHTS logs/demo/model_final.pth

After writing the file it runs it (onnxruntime / ``torch.jit.load``) on ``--input`` images (default:
the query images of the first test set) and prints the largest difference from PyTorch's features;
it exits 1 when that is above ``--tolerance`` (1e-4).

``--quantize int8`` then writes a static int8 (QDQ) copy of the ONNX model
(:mod:`fastreid.inference.quantize`), calibrated on ``--calib-images`` training images
(``--calib-input``, else the config's training set) read with the model's test pre-processing, and
prints its Rank-1 / mAP beside the fp32 model's on a held-out query / gallery set (the config's
test set, or ``--check-query`` / ``--check-gallery``). When the int8 model's mAP is more than
``--max-map-drop`` points below, the int8 file is deleted and the command exits 1; the fp32 model
stays in every case.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from typing import Any

from fastreid.cli.entry import tool_entry_point
from fastreid.config.locate import resolve_config_file
from fastreid.data.datasets import DATASET_REGISTRY
from fastreid.data.datasets.bases import DatasetNotFoundError
from fastreid.utils.errors import UserError

__all__ = ["get_parser", "main", "run"]

logger = logging.getLogger("fastreid.export")


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Export a re-ID model to ONNX or TorchScript and check it")
    parser.add_argument(
        "--config-file", required=True, metavar="FILE", type=resolve_config_file, help="the model's config"
    )
    parser.add_argument("--format", required=True, choices=["onnx", "torchscript"])
    parser.add_argument(
        "--output", default=None, help="the exported file (default: model.onnx / model.ts in OUTPUT_DIR)"
    )
    parser.add_argument(
        "--dynamic-batch", action="store_true", help="any batch size (else --batch-size only)"
    )
    parser.add_argument("--batch-size", type=int, default=1, help="batch size of a static export")
    parser.add_argument(
        "--input",
        nargs="+",
        default=None,
        help="images to check the export on (default: the query images of DATASETS.TESTS[0])",
    )
    parser.add_argument("--num-check-images", type=int, default=8, help="how many of them")
    parser.add_argument(
        "--tolerance",
        type=float,
        default=1e-4,
        help="largest allowed feature difference (divided by the largest feature when that is > 1)",
    )
    parser.add_argument("--opset", type=int, default=None, help="ONNX opset (default: the exporter's)")
    parser.add_argument(
        "--exporter",
        default="dynamo",
        choices=["dynamo", "legacy"],
        help="torch.onnx exporter: dynamo (torch.export) or legacy (TorchScript based)",
    )
    int8 = parser.add_argument_group("int8 quantization (--format onnx)")
    int8.add_argument(
        "--quantize",
        default=None,
        choices=["int8"],
        help="also write a static int8 model (ONNX Runtime's quantizer, QDQ, per-channel) and check its accuracy",
    )
    int8.add_argument(
        "--int8-output", default=None, help="the int8 file (default: the ONNX output's name + _int8.onnx)"
    )
    int8.add_argument(
        "--calib-input",
        nargs="+",
        default=None,
        help="calibration images: folders, globs or .txt lists (default: the training set of DATASETS.NAMES)",
    )
    int8.add_argument(
        "--calib-images", type=int, default=256, help="how many calibration images (drawn from --calib-input)"
    )
    int8.add_argument(
        "--check-query",
        nargs="+",
        default=None,
        help="query images named like Market-1501 (default: DATASETS.TESTS[0])",
    )
    int8.add_argument(
        "--check-gallery", nargs="+", default=None, help="gallery images named like Market-1501"
    )
    int8.add_argument(
        "--max-map-drop",
        type=float,
        default=1.0,
        help="largest allowed mAP loss of the int8 model, in points; above it the int8 file is deleted",
    )
    int8.add_argument(
        "--reduce-range",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="7-bit weights (default: only on an x86 CPU without VNNI, where 8-bit products can saturate)",
    )
    parser.add_argument(
        "opts", default=[], nargs=argparse.REMAINDER, help="config overrides: KEY VALUE pairs"
    )
    return parser


def _feature_extractor(**kwargs: Any):
    from fastreid.inference.extractor import FeatureExtractor  # torch: only once the arguments are good

    return FeatureExtractor(**kwargs)


def _image_files(inputs: list[str]) -> list[str]:
    from fastreid.inference.inputs import list_image_files  # torch: only once the arguments are good

    return list_image_files(inputs)


def _dataset(name: str):
    """The registered data set ``name``, read from the datasets root."""
    from fastreid.data.build import datasets_root  # torch: only once the arguments are good

    return DATASET_REGISTRY.get(name)(root=datasets_root())


def check_images(args: argparse.Namespace, cfg) -> list[str]:
    """``--input`` images, else the first test set's query images; at most ``--num-check-images``."""
    if args.input:
        files = _image_files(args.input)
    else:
        if not cfg.DATASETS.TESTS:
            raise DatasetNotFoundError(
                "no --input images and DATASETS.TESTS is empty: pass --input with a few images"
            )
        files = [item[0] for item in _dataset(cfg.DATASETS.TESTS[0]).query]
    if not files:
        raise DatasetNotFoundError("no images to check the export on: pass --input")
    return files[: max(1, args.num_check_images)]


def calibration_files(args: argparse.Namespace, cfg) -> list[str]:
    """``--calib-images`` of ``--calib-input``, else of the training sets of ``DATASETS.NAMES``."""
    # torch: only once the arguments are good
    from fastreid.inference.quantize import CalibrationError, choose_calibration_files

    if args.calib_input:
        files, source = _image_files(args.calib_input), " ".join(args.calib_input)
    elif not cfg.DATASETS.NAMES:
        raise CalibrationError(
            "no --calib-input and DATASETS.NAMES is empty: pass --calib-input with training images"
        )
    else:
        files, source = [], f"the training set of {', '.join(cfg.DATASETS.NAMES)}"
        for name in cfg.DATASETS.NAMES:
            try:
                files += [item[0] for item in _dataset(name).train]
            except UserError as e:
                raise CalibrationError(
                    f"calibration images from {name}: {e} (or pass --calib-input with training images)"
                ) from e
    return choose_calibration_files(files, args.calib_images, source)


def quantize_and_check(args: argparse.Namespace, extractor, fp32_path: str, calib: list[str], check) -> None:
    """Write the int8 model, compare its retrieval metrics with the fp32 model's, and delete it
    (exit 1) when its mAP drops by more than ``--max-map-drop``."""
    # the inference modules import torch: only once the arguments are good
    from fastreid.inference.accuracy import cosine_to, retrieval_metrics
    from fastreid.inference.backends import OnnxRuntimeBackend  # torch, as above
    from fastreid.inference.quantize import AccuracyDropError, calibration_batches, quantize_int8  # as above

    int8_path = args.int8_output or os.path.splitext(fp32_path)[0] + "_int8.onnx"
    fixed = OnnxRuntimeBackend(extractor.cfg, fp32_path).fixed_batch
    batches = calibration_batches(
        extractor.preprocess, calib, fixed or min(32, extractor.batch_size), bool(fixed)
    )
    report = quantize_int8(fp32_path, int8_path, batches, reduce_range=args.reduce_range)
    print(f"int8 export: {int8_path}  {report.describe()}", flush=True)

    query, gallery, source = check
    results = {}
    for label, path in (("fp32", fp32_path), ("int8", int8_path)):
        onnx_extractor = _feature_extractor(
            cfg=extractor.cfg, device="cpu", backend="onnxruntime", model_file=path
        )
        start = time.perf_counter()
        results[label] = retrieval_metrics(onnx_extractor, query, gallery)
        seconds = time.perf_counter() - start
        logger.info("%s: %d images in %.1f s (decoding included)", label, len(query) + len(gallery), seconds)
    keys = [k for k in ("Rank-1", "Rank-5", "Rank-10", "mAP", "mINP") if k in results["fp32"].metrics]
    print(
        f"accuracy on {source} ({len(query)} queries, {len(gallery)} gallery images, "
        f"{extractor.cfg.TEST.METRIC} distance):",
        flush=True,
    )
    print("  model " + "".join(f"{k:>9}" for k in keys))
    for label, result in results.items():
        print(f"  {label:5s} " + "".join(f"{result.metrics[k]:8.2f}%" for k in keys))
    low, mean = cosine_to(results["fp32"].features, results["int8"].features)
    print(f"  int8 features vs fp32: cosine min {low:.5f}, mean {mean:.5f}", flush=True)
    drop = results["fp32"].metrics["mAP"] - results["int8"].metrics["mAP"]
    if not drop <= args.max_map_drop:
        os.remove(int8_path)
        raise AccuracyDropError(
            f"the int8 model loses {drop:.2f} mAP points (fp32 {results['fp32'].metrics['mAP']:.2f}%, int8 "
            f"{results['int8'].metrics['mAP']:.2f}%), more than --max-map-drop {args.max_map_drop:g}: deleted "
            f"{int8_path} (the fp32 model {fp32_path} is kept); calibrate on more or other images "
            "(--calib-images, --calib-input) or allow a larger drop"
        )
    print(f"mAP drop {drop:.2f} points <= --max-map-drop {args.max_map_drop:g}: kept {int8_path}", flush=True)


def main(args: argparse.Namespace) -> int:
    # the inference modules import torch: only once the arguments are good
    from fastreid.inference.export import check_export, export_onnx, export_torchscript, require

    if args.quantize and args.format != "onnx":
        raise UserError(f"--quantize {args.quantize} quantizes an ONNX model: use --format onnx")
    if args.format == "onnx":  # a missing extra is said before any work
        require("onnx", "ONNX export")
        require("onnxruntime", "Checking the ONNX export")
    if args.quantize:
        require("onnxruntime.quantization", "int8 quantization (--quantize int8)")
    extractor = _feature_extractor(config_file=args.config_file, device="cpu", opts=args.opts)
    cfg = extractor.cfg
    output = args.output or os.path.join(
        cfg.OUTPUT_DIR or ".", "model.onnx" if args.format == "onnx" else "model.ts"
    )
    calib, check = None, None
    if args.quantize:  # the images are found before any work, so that a wrong path fails at once
        from fastreid.inference.accuracy import labelled_test_set  # torch: only once the arguments are good

        calib = calibration_files(args, cfg)
        check = labelled_test_set(cfg, args.check_query, args.check_gallery)
    images = extractor.preprocess(check_images(args, cfg)).float()
    example = images[: 2 if args.dynamic_batch else args.batch_size]
    if len(example) < (2 if args.dynamic_batch else args.batch_size):
        example = example.repeat(args.batch_size, 1, 1, 1)[: args.batch_size]
    start = time.perf_counter()
    if args.format == "onnx":
        export_onnx(
            extractor.model,
            example,
            output,
            dynamic_batch=args.dynamic_batch,
            opset=args.opset,
            exporter=args.exporter,
        )
    else:
        export_torchscript(extractor.model, example, output)
    logger.info(
        "Exported %s to %s in %.1f s", cfg.MODEL.META_ARCHITECTURE, output, time.perf_counter() - start
    )
    if args.dynamic_batch or args.format == "torchscript":
        sizes = tuple(sorted({1, min(len(images), 3), len(images)}))
    else:
        sizes = (args.batch_size,)
        if len(images) < args.batch_size:
            images = images.repeat(args.batch_size, 1, 1, 1)[: args.batch_size]
    result = check_export(extractor.model, output, args.format, images, sizes, args.tolerance)
    print(
        f"{args.format} export: {output}  input images float32 N x 3 x {images.shape[2]} x {images.shape[3]} "
        f"(RGB, 0..255) -> features N x {result.feature_dim}",
        flush=True,
    )
    print(
        f"check on {len(images)} images, batch sizes {', '.join(map(str, result.batch_sizes))}: max |difference| "
        f"{result.max_abs_diff:.2e} (features up to {result.max_abs_feature:.2f}; scaled "
        f"{result.scaled_diff:.2e} <= tolerance {args.tolerance:g}) OK",
        flush=True,
    )
    if calib is not None:
        quantize_and_check(args, extractor, output, calib, check)
    return 0


run = tool_entry_point(get_parser, main, "input")


if __name__ == "__main__":
    sys.exit(run())
