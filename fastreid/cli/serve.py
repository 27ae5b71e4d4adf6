"""``fastreid-serve --model RUN_DIR_OR_WEIGHTS --gallery FOLDER [--port N]``: the local search page
(:mod:`fastreid.serve`), bound to 127.0.0.1 unless ``--host`` says otherwise.

    fastreid-serve --model logs/demo --gallery datasets/Market-1501-v15.09.15/bounding_box_test
    fastreid-serve --model logs/demo --features feats/          # what fastreid-extract wrote
"""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
from collections.abc import Sequence
from typing import Any, Optional

from fastreid.config.locate import resolve_config_file
from fastreid.utils.errors import UserError, run_tool
from fastreid.utils.extras import require
from fastreid.utils.logger import setup_logger

__all__ = ["build", "get_parser", "main", "model_files", "run"]

logger = logging.getLogger(__name__)

#: The names of this machine a loopback server answers to (a Host check against DNS rebinding).
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fastreid-serve",
        description="A local web page (and JSON API) that searches a gallery by photo.",
        epilog="Example:\n  fastreid-serve --model logs/demo --gallery datasets/Market-1501-v15.09.15/bounding_box_test",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--model",
        required=True,
        help="a training run's OUTPUT_DIR (config.yaml + model_final.pth) or a .pth file",
    )
    parser.add_argument(
        "--config-file",
        type=resolve_config_file,
        help="the model's config (default: config.yaml in the run folder, or beside the .pth)",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--gallery", help="a folder (or glob, or list file) of gallery images")
    source.add_argument(
        "--features", help="fastreid-extract's output for the gallery (its folder, or a .npy/.pt file)"
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)"
    )
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument(
        "--max-upload-mb", type=float, default=10.0, help="largest upload accepted, in MB (default 10)"
    )
    parser.add_argument(
        "--max-megapixels",
        type=float,
        default=40.0,
        help="largest image accepted, in millions of pixels (default 40; a decompression bomb is refused)",
    )
    parser.add_argument("--device", default="auto", help='"auto" (default), "cpu", "cuda", ...')
    parser.add_argument("opts", nargs=argparse.REMAINDER, help="config overrides: KEY VALUE ...")
    return parser


def model_files(model: str, config_file: Optional[str] = None) -> tuple[str, str]:
    """``(config, weights)`` of ``--model``: a run folder (its ``config.yaml`` and
    ``model_final.pth``) or a checkpoint file (the ``config.yaml`` beside it); ``config_file``
    overrides the config."""
    if not os.path.exists(model):
        raise UserError(
            f"fastreid-serve: --model {model}: no such run folder (OUTPUT_DIR of a training) or checkpoint file"
        )
    if os.path.isdir(model):
        config = config_file or os.path.join(model, "config.yaml")
        weights = os.path.join(model, "model_final.pth")
        if not os.path.isfile(weights) and os.path.isfile(os.path.join(model, "last_checkpoint")):
            raise UserError(
                f"fastreid-serve: {model} has no model_final.pth (is its training unfinished?); "
                "pass one of its checkpoints as --model, e.g. --model "
                f"{os.path.join(model, 'model_0000999.pth')}"
            )
    else:
        config, weights = config_file or os.path.join(os.path.dirname(model), "config.yaml"), model
    for path, what in ((config, "config"), (weights, "weights")):
        if not os.path.isfile(path):
            raise UserError(
                f"fastreid-serve: the model's {what} {path} does not exist (see --model, --config-file)"
            )
    return config, weights


def _check_port_free(host: str, port: int) -> None:
    """Fail now, before the model and the gallery are loaded, when the port cannot be bound."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as e:
        raise UserError(f"fastreid-serve: --host {host!r} is not an address of this machine ({e})") from None
    with socket.socket(family, kind, proto) as s:
        # as uvicorn binds it; Windows' SO_REUSEADDR would let a port in use be bound again
        exclusive = getattr(socket, "SO_EXCLUSIVEADDRUSE", None)
        s.setsockopt(socket.SOL_SOCKET, exclusive if exclusive is not None else socket.SO_REUSEADDR, 1)
        try:
            s.bind(address)
        except OSError as e:
            raise UserError(
                f"fastreid-serve: cannot listen on {host}:{port} ({e.strerror or e}); "
                "choose another --port (or stop what uses it)"
            ) from None


def build(args: argparse.Namespace) -> Any:
    """The app ``args`` describe: the model loaded, the gallery indexed."""
    from fastreid.inference import FeatureExtractor  # torch and the model: only once the arguments are good
    from fastreid.serve import Gallery, create_app  # imports torch: only once the arguments are good

    if args.max_upload_mb <= 0 or args.max_megapixels <= 0:
        raise UserError("fastreid-serve: --max-upload-mb and --max-megapixels must be positive")
    config, weights = model_files(args.model, args.config_file)
    extractor = FeatureExtractor(config, weights, device=args.device, opts=args.opts)
    gallery = Gallery.build(extractor, folder=args.gallery, features=args.features)
    return create_app(
        gallery,
        max_bytes=int(args.max_upload_mb * 1024 * 1024),
        max_pixels=int(args.max_megapixels * 1_000_000),
        allowed_hosts=list(LOOPBACK_NAMES) if args.host in LOOPBACK_NAMES else None,
    )


def main(args: argparse.Namespace) -> int:
    require("fastapi", "fastreid-serve", "serve")
    uvicorn = require("uvicorn", "fastreid-serve", "serve")
    _check_port_free(args.host, args.port)
    app = build(args)
    if args.host not in LOOPBACK_NAMES:
        logger.warning(f"Serving on {args.host}: other machines can reach this page (there is no login)")
    shown = f"[{args.host}]" if ":" in args.host else args.host
    print(f"Search page: http://{shown}:{args.port}/  (Ctrl+C stops it)", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", limit_concurrency=64)
    return 0


def run(argv: Optional[Sequence[str]] = None) -> int:
    args = get_parser().parse_args(argv)
    setup_logger(name="fastreid")
    return run_tool(lambda: main(args))


if __name__ == "__main__":
    sys.exit(run())
