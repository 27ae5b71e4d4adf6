"""``tools/extract_features.py`` (``fastreid-extract``): features of a folder, glob or list of images.

    python tools/extract_features.py --config-file logs/demo/config.yaml \
        --input datasets/Market-1501-v15.09.15/query --output logs/demo/query_feats \
        MODEL.WEIGHTS logs/demo/model_final.pth

writes ``OUT/features.npy`` (N x D float32; ``--format pt`` or ``both`` for ``features.pt``) and
``OUT/files.txt`` (row i is line i), through fixed-size shards in ``OUT/shards/``: run the same
command again after an interruption and the finished shards are skipped.

``--backend onnxruntime`` (or ``openvino``) runs an exported model instead of the PyTorch one:
``--model FILE.onnx`` from ``fastreid-export --format onnx`` (fp32, or ``--quantize int8``), with the
same decoding, resizing, batching and flip-averaging (the normalisation is inside the graph).

``--num-processes N`` extracts with N processes on this machine: process r takes shards r, r + N, ...
(each with its share of the CPU threads) and the parent joins the shards once all are written. Batches
never cross a shard, so the features are those of one process with the same threads per process,
row for row and bit for bit. A process that fails or dies fails the command, naming it; its shards
stay unwritten, no merged file is written, and a re-run does only what is missing.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from tqdm import tqdm

from fastreid.cli.entry import tool_entry_point
from fastreid.config.locate import resolve_config_file
from fastreid.utils.errors import UserError
from fastreid.utils.logger import setup_logger

__all__ = ["get_parser", "main", "run"]

logger = logging.getLogger("fastreid.extract")


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Extract re-ID features of images (resumable, sharded)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Example:\n  python tools/extract_features.py --config-file logs/demo/config.yaml "
        "--input crops/ --output feats/ MODEL.WEIGHTS logs/demo/model_final.pth",
    )
    parser.add_argument(
        "--config-file",
        required=True,
        metavar="FILE",
        type=resolve_config_file,
        help="the model's config (e.g. config.yaml of the run)",
    )
    parser.add_argument(
        "--input",
        required=True,
        nargs="+",
        help="image folders (walked), glob patterns ('crops/*.jpg'), .txt lists or image files",
    )
    parser.add_argument("--output", required=True, help="output folder (features.npy, files.txt, shards/)")
    parser.add_argument(
        "--format", default="npy", choices=["npy", "pt", "both"], help="merged feature file format"
    )
    parser.add_argument(
        "--shard-size", type=int, default=10000, help="images per shard (the unit of resuming)"
    )
    parser.add_argument(
        "--no-merge",
        action="store_true",
        help="keep only the shards (for very large sets; tools/search.py reads them)",
    )
    parser.add_argument("--normalize", action="store_true", help="L2-normalise the features")
    parser.add_argument("--device", default="auto", help="auto (CUDA, MPS, CPU), cpu, cuda, cuda:1, mps ...")
    parser.add_argument(
        "--backend",
        default="torch",
        choices=["torch", "onnxruntime", "openvino"],
        help="torch (the checkpoint in MODEL.WEIGHTS) or an exported --model run by ONNX Runtime / OpenVINO (CPU)",
    )
    parser.add_argument(
        "--model",
        default=None,
        metavar="FILE",
        help="the exported model for --backend onnxruntime/openvino (from fastreid-export --format onnx)",
    )
    parser.add_argument("--batch-size", type=int, default=None, help="default TEST.IMS_PER_BATCH")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace an extraction of other inputs in --output"
    )
    parser.add_argument(
        "--num-processes",
        type=int,
        default=1,
        help="extract with N processes on this machine (each owns every N-th shard)",
    )
    parser.add_argument(
        "opts", default=[], nargs=argparse.REMAINDER, help="config overrides: KEY VALUE pairs"
    )
    return parser


def _settings(extractor, normalize: bool) -> dict:
    cfg = extractor.cfg
    settings = {
        "weights": os.path.abspath(cfg.MODEL.WEIGHTS) if cfg.MODEL.WEIGHTS else "",
        "normalize": bool(normalize),
        "flip": extractor.flip,
        "size_test": list(cfg.INPUT.SIZE_TEST),
    }
    model_file = getattr(extractor.backend, "model_file", None)
    if model_file:  # an exported model: recorded, so that resuming with another model is refused
        settings.update(backend=extractor.backend.name, model=os.path.abspath(model_file))
    return settings


def _extractor(args: argparse.Namespace, threads: int | None = None):
    from fastreid.inference.extractor import FeatureExtractor  # torch: only once the arguments are good

    return FeatureExtractor(
        config_file=args.config_file,
        device=args.device,
        opts=args.opts,
        batch_size=args.batch_size,
        backend=args.backend,
        model_file=args.model,
        threads=threads,
    )


def _store(args: argparse.Namespace, files: list[str], settings: dict, overwrite: bool = False):
    """The shard store of ``args.output`` for ``files``."""
    from fastreid.inference.shards import FeatureStore  # torch: only once the arguments are good

    return FeatureStore(args.output, files, args.shard_size, settings, overwrite=overwrite)


def _extract_shards(extractor, store, args, rank: int = 0, world_size: int = 1, on_rows=None) -> int:
    """Write the unfinished shards ``rank`` owns, one shard's images at a time (so that a batch
    never spans two shards, whatever the split), and return how many were written."""
    import torch.nn.functional as F  # torch: only once the arguments are good

    written = 0
    for k in store.pending_shards(rank, world_size):
        batches = extractor.iter_path_features(store.shard_files(k))
        if args.normalize:
            batches = ((paths, F.normalize(feats, dim=1)) for paths, feats in batches)
        written += store.write(batches, on_rows=on_rows, shards=[k])
    return written


def _worker(args: argparse.Namespace, files: list[str], rank: int, world_size: int, threads: int) -> int:
    """One of ``--num-processes``: its own model, ``threads`` torch threads, its shards."""
    import torch  # only once the arguments are good

    setup_logger(name="fastreid")
    torch.set_num_threads(threads)
    extractor = _extractor(args, threads)
    store = _store(args, files, _settings(extractor, args.normalize))
    return _extract_shards(extractor, store, args, rank, world_size)


def _extract_with_processes(args: argparse.Namespace, files: list[str], store) -> None:
    """Run ``--num-processes`` workers over ``store``'s unfinished shards; a failure names the
    process."""
    import torch  # only once the arguments are good

    n = args.num_processes
    threads = max(1, torch.get_num_threads() // n)
    logger.info("Extracting with %d processes, %d torch thread(s) each", n, threads)
    with ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_worker, args, files, rank, n, threads) for rank in range(n)]
        for rank, future in enumerate(futures):
            try:
                future.result()
            except BrokenProcessPool:
                raise UserError(
                    f"An extraction process died (process {rank} of {n} was waiting for its result); "
                    f"the finished shards are kept in {args.output}: run the same command again to finish"
                ) from None
            except Exception as e:
                raise UserError(
                    f"Extraction process {rank} of {n} failed: {type(e).__name__}: {e}; the finished shards "
                    f"are kept in {args.output}"
                ) from e


def main(args: argparse.Namespace) -> int:
    from fastreid.inference.inputs import list_image_files  # torch: only once the arguments are good

    if args.num_processes < 1:
        raise ValueError(f"--num-processes must be at least 1, got {args.num_processes}")
    files = [os.path.abspath(p) for p in list_image_files(args.input)]
    extractor = _extractor(args)
    store = _store(args, files, _settings(extractor, args.normalize), overwrite=args.overwrite)
    pending = store.pending_files()
    done = len(files) - len(pending)
    if done:
        logger.info(
            "Resuming: %d of %d shards already finished (%d images)",
            store.num_shards - len(store.pending_shards()),
            store.num_shards,
            done,
        )
    if pending and args.num_processes > 1:
        settings = store.settings
        del extractor  # each process loads its own
        _extract_with_processes(args, files, store)
        store = _store(args, files, settings)  # with what the processes recorded
    elif pending:
        with tqdm(total=len(files), initial=done, desc="features", unit="img", dynamic_ncols=True) as bar:
            _extract_shards(extractor, store, args, on_rows=bar.update)
    written = [] if args.no_merge else store.merge(["npy", "pt"] if args.format == "both" else [args.format])
    logger.info(
        "%d features of size %s for %d images in %s",
        len(files),
        store.settings.get("feature_dim"),
        len(files),
        os.path.abspath(args.output),
    )
    for path in written:
        logger.info("wrote %s", path)
    print(
        f"features: {', '.join(written) or os.path.join(args.output, 'shards')}  "
        f"files: {os.path.join(args.output, 'files.txt')}  ({len(files)} images)",
        flush=True,
    )
    return 0


run = tool_entry_point(get_parser, main, "input")


if __name__ == "__main__":
    sys.exit(run())
