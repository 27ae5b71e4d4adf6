"""``fastreid-serve --model RUN_DIR_OR_WEIGHTS --gallery FOLDER [--port N]``: the local search page
(:mod:`fastreid.serve`), bound to 127.0.0.1 unless ``--host`` says otherwise."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import Optional

from fastreid.config.locate import resolve_config_file
from fastreid.utils.errors import UserError, run_tool

__all__ = ["get_parser", "main", "run"]

logger = logging.getLogger(__name__)


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fastreid-serve", description="A local web page (and JSON API) that searches a gallery by photo."
    )
    parser.add_argument(
        "--model",
        required=True,
        help="a training run's OUTPUT_DIR (config.yaml + model_final.pth) or a .pth file",
    )
    parser.add_argument(
        "--config-file", type=resolve_config_file, help="the model's config (with a .pth --model)"
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--gallery", help="a folder (or glob, or list file) of gallery images")
    source.add_argument("--features", help="fastreid-extract's output for the gallery (folder or file)")
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)"
    )
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--max-upload-mb", type=float, default=10.0, help="largest upload accepted (default 10)"
    )
    parser.add_argument("--device", default="auto", help='"auto", "cpu", "cuda", ...')
    parser.add_argument("opts", nargs=argparse.REMAINDER, help="config overrides: KEY VALUE ...")
    return parser


def _model_files(model: str, config_file: Optional[str]) -> tuple[str, str]:
    if os.path.isdir(model):
        config = config_file or os.path.join(model, "config.yaml")
        weights = os.path.join(model, "model_final.pth")
    else:
        config, weights = config_file or os.path.join(os.path.dirname(model), "config.yaml"), model
    for path, what in ((config, "config"), (weights, "weights")):
        if not os.path.isfile(path):
            raise UserError(
                f"fastreid-serve: the model's {what} {path} does not exist (see --model, --config-file)"
            )
    return config, weights


def build(args: argparse.Namespace):
    from fastreid.inference import FeatureExtractor
    from fastreid.serve import Gallery, create_app

    config, weights = _model_files(args.model, args.config_file)
    extractor = FeatureExtractor(config, weights, device=args.device, opts=args.opts)
    gallery = Gallery.build(extractor, folder=args.gallery, features=args.features)
    return create_app(gallery, max_bytes=int(args.max_upload_mb * 1024 * 1024))


def main(args: argparse.Namespace) -> int:
    from fastreid.utils.extras import require

    uvicorn = require("uvicorn", "fastreid-serve", "serve")
    app = build(args)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        logger.warning(f"Serving on {args.host}: other machines can reach this page (there is no login)")
    print(f"Search page: http://{args.host}:{args.port}/", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


def run(argv: Optional[Sequence[str]] = None) -> int:
    from fastreid.utils.logger import setup_logger

    args = get_parser().parse_args(argv)
    setup_logger(name="fastreid")
    return run_tool(lambda: main(args))


if __name__ == "__main__":
    sys.exit(run())
