"""``tools/deploy/export.py`` (``fastreid-export``): ONNX or TorchScript, checked on real images.

    python tools/deploy/export.py --config-file logs/demo/config.yaml --format onnx --dynamic-batch \
        --output logs/demo/model.onnx MODEL.WEIGHTS logs/demo/model_final.pth

After writing the file it runs it (onnxruntime / ``torch.jit.load``) on ``--input`` images (default:
the query images of the first test set) and prints the largest difference from PyTorch's features;
it exits 1 when that is above ``--tolerance`` (1e-4).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

from fastreid.cli.entry import tool_entry_point
from fastreid.config.locate import resolve_config_file

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
    parser.add_argument(
        "opts", default=[], nargs=argparse.REMAINDER, help="config overrides: KEY VALUE pairs"
    )
    return parser


def check_images(args: argparse.Namespace, cfg) -> list[str]:
    """``--input`` images, else the first test set's query images; at most ``--num-check-images``."""
    from fastreid.data.datasets.bases import DatasetNotFoundError
    from fastreid.inference.inputs import list_image_files

    if args.input:
        files = list_image_files(args.input)
    else:
        from fastreid.data.build import datasets_root
        from fastreid.data.datasets import DATASET_REGISTRY

        if not cfg.DATASETS.TESTS:
            raise DatasetNotFoundError(
                "no --input images and DATASETS.TESTS is empty: pass --input with a few images"
            )
        data = DATASET_REGISTRY.get(cfg.DATASETS.TESTS[0])(root=datasets_root())
        files = [item[0] for item in data.query]
    if not files:
        raise DatasetNotFoundError("no images to check the export on: pass --input")
    return files[: max(1, args.num_check_images)]


def main(args: argparse.Namespace) -> int:
    from fastreid.inference.export import check_export, export_onnx, export_torchscript, require
    from fastreid.inference.extractor import FeatureExtractor

    if args.format == "onnx":  # a missing extra is said before any work
        require("onnx", "ONNX export")
        require("onnxruntime", "Checking the ONNX export")
    extractor = FeatureExtractor(config_file=args.config_file, device="cpu", opts=args.opts)
    cfg = extractor.cfg
    output = args.output or os.path.join(
        cfg.OUTPUT_DIR or ".", "model.onnx" if args.format == "onnx" else "model.ts"
    )
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
    return 0


run = tool_entry_point(get_parser, main, "input")


if __name__ == "__main__":
    sys.exit(run())
