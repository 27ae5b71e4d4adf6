"""``fastreid-serve --model RUN_DIR_OR_WEIGHTS --gallery FOLDER [--port N]``: the local search page
(:mod:`fastreid.serve`), bound to 127.0.0.1 unless ``--host`` says otherwise.

    fastreid-serve --model logs/demo --gallery datasets/Market-1501-v15.09.15/bounding_box_test
    fastreid-serve --model logs/demo --features feats/          # what fastreid-extract wrote
    fastreid-serve --model logs/demo --features feats/ --allow-gallery-updates   # POST/DELETE /gallery
    fastreid-serve --model logs/demo --features feats/ --replicas 4 [--address ray://head:10001]

One process serves with uvicorn, whose own connection limit is off: the app decides what waits and
what is refused (and refuses in JSON); ``--replicas`` runs the same app on Ray Serve.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import socket
import sys
import time
from collections.abc import Sequence
from typing import Any, Optional

from fastreid.config.locate import resolve_config_file
from fastreid.utils.errors import UserError, run_tool
from fastreid.utils.extras import require
from fastreid.utils.logger import setup_logger
from fastreid.utils.threads import configure_openmp

__all__ = ["UVICORN_OPTIONS", "build", "check_args", "get_parser", "main", "model_files", "run"]

logger = logging.getLogger(__name__)

#: The names of this machine a loopback server answers to (a Host check against DNS rebinding).
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
#: How the command runs uvicorn. No ``limit_concurrency``: past it uvicorn answers a plain-text 503
#: (or drops the connection) whatever the request; the app bounds its own work and refuses in JSON.
UVICORN_OPTIONS: dict[str, Any] = {"log_level": "warning", "limit_concurrency": None}


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
    load = parser.add_argument_group("under load")
    load.add_argument(
        "--max-uploads",
        type=int,
        default=16,
        help="searches reading or decoding their upload at once (default 16)",
    )
    load.add_argument(
        "--max-queue",
        type=int,
        default=128,
        help="searches that may wait beyond those; past it a search is refused with 503 and Retry-After "
        "(default 128)",
    )
    load.add_argument(
        "--idle-timeout",
        type=float,
        default=10.0,
        help="seconds an upload may send nothing before it is dropped with 408 (default 10)",
    )
    load.add_argument(
        "--upload-timeout", type=float, default=60.0, help="seconds an upload may take in all (default 60)"
    )
    load.add_argument("--workers", type=int, default=2, help="threads that decode uploads (default 2)")
    load.add_argument(
        "--max-batch",
        type=int,
        default=16,
        help="searches that share one model forward (default 16; 1: one query per forward)",
    )
    load.add_argument(
        "--max-wait-ms",
        type=float,
        default=5.0,
        help="how long a batch waits for searches still being decoded, in ms (default 5)",
    )
    parser.add_argument(
        "--allow-gallery-updates",
        action="store_true",
        help="take POST /gallery and DELETE /gallery/NAME from this machine: they change the --features "
        "folder in place",
    )
    ray = parser.add_argument_group("replicas (Ray Serve, the serve-ray extra)")
    ray.add_argument(
        "--replicas", type=int, default=0, help="serve from N replicas behind Ray Serve's HTTP proxy"
    )
    ray.add_argument(
        "--address",
        default=None,
        help="a running Ray cluster (ray://head:10001, or its GCS address head:6379; default: Ray on this machine)",
    )
    ray.add_argument("--replica-cpus", type=float, default=1.0, help="CPUs each replica takes (default 1)")
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


def check_args(args: argparse.Namespace) -> None:
    """Refuse, before anything loads, the options that cannot work together."""
    for name in ("max_upload_mb", "max_megapixels", "idle_timeout", "upload_timeout"):
        if getattr(args, name) <= 0:
            raise UserError(f"fastreid-serve: --{name.replace('_', '-')} must be positive")
    for name in ("max_uploads", "workers", "max_batch"):
        if getattr(args, name) < 1:
            raise UserError(f"fastreid-serve: --{name.replace('_', '-')} must be at least 1")
    if args.max_queue < 0 or args.max_wait_ms < 0 or args.replicas < 0:
        raise UserError("fastreid-serve: --max-queue, --max-wait-ms and --replicas must not be negative")
    if args.allow_gallery_updates:
        if args.replicas:
            raise UserError(
                "fastreid-serve: --allow-gallery-updates needs one process (each replica would change the "
                "folder on its own): leave --replicas out"
            )
        if args.host not in LOOPBACK_NAMES:
            raise UserError(
                f"fastreid-serve: --allow-gallery-updates is served on loopback only, not on --host {args.host}"
            )
        if not (args.features and os.path.isdir(args.features)):
            raise UserError(
                "fastreid-serve: --allow-gallery-updates changes the gallery's features folder in place: give "
                "--features FOLDER, the folder fastreid-extract wrote (not --gallery, not a file)"
            )
    if args.address and not args.replicas:
        raise UserError("fastreid-serve: --address is the Ray cluster of --replicas; give --replicas N too")


def build(args: argparse.Namespace) -> Any:
    """The app ``args`` describe: the model loaded, the gallery indexed."""
    from fastreid.inference import FeatureExtractor  # torch and the model: only once the arguments are good
    from fastreid.serve import Gallery, create_app  # imports torch: only once the arguments are good

    check_args(args)
    config, weights = model_files(args.model, args.config_file)
    extractor = FeatureExtractor(config, weights, device=args.device, opts=args.opts)
    gallery = Gallery.build(
        extractor, folder=args.gallery, features=args.features, editable=args.allow_gallery_updates
    )
    return create_app(
        gallery,
        max_bytes=int(args.max_upload_mb * 1024 * 1024),
        max_pixels=int(args.max_megapixels * 1_000_000),
        workers=args.workers,
        max_uploads=args.max_uploads,
        max_queue=args.max_queue,
        upload_timeout=args.upload_timeout,
        idle_timeout=args.idle_timeout,
        max_batch=args.max_batch,
        max_wait=args.max_wait_ms / 1000,
        allowed_hosts=list(LOOPBACK_NAMES) if args.host in LOOPBACK_NAMES else None,
    )


def _serve_replicas(args: argparse.Namespace, shown: str) -> None:
    from fastreid.serve.replicas import ReplicaServer  # Ray: only for --replicas

    # a replica takes the app's own limits plus room for the page, health checks and thumbnails
    max_ongoing = 2 * (args.max_uploads + args.max_queue) + 64
    server = ReplicaServer(
        functools.partial(build, args),
        replicas=args.replicas,
        host=args.host,
        port=args.port,
        address=args.address,
        replica_cpus=args.replica_cpus,
        max_ongoing=max_ongoing,
    )
    with server:
        print(f"Search page: http://{shown}:{args.port}/  ({args.replicas} replicas on Ray Serve; Ctrl+C stops them)",
              flush=True)  # fmt: skip
        try:
            while True:
                time.sleep(1)
        except KeyboardInterrupt:
            pass


def main(args: argparse.Namespace) -> int:
    require("fastapi", "fastreid-serve", "serve")
    uvicorn = require("uvicorn", "fastreid-serve", "serve")
    check_args(args)
    if args.replicas:
        require("ray.serve", "fastreid-serve --replicas", "serve-ray")
    if not args.address:
        _check_port_free(args.host, args.port)
    if args.host not in LOOPBACK_NAMES:
        logger.warning(f"Serving on {args.host}: other machines can reach this page (there is no login)")
    shown = f"[{args.host}]" if ":" in args.host else args.host
    if args.replicas:
        model_files(args.model, args.config_file)  # named here, not in a replica's log
        _serve_replicas(args, shown)
        return 0
    app = build(args)
    print(f"Search page: http://{shown}:{args.port}/  (Ctrl+C stops it)", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, **UVICORN_OPTIONS)
    return 0


def run(argv: Optional[Sequence[str]] = None) -> int:
    configure_openmp()  # before torch is imported: the model's threads share the cores with the uploads'
    args = get_parser().parse_args(argv)
    setup_logger(name="fastreid")
    return run_tool(lambda: main(args))


if __name__ == "__main__":
    sys.exit(run())
