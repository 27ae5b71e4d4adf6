"""``tools/extract_features.py`` (``fastreid-extract``): features of a folder, glob or list of images.

    python tools/extract_features.py --config-file logs/demo/config.yaml \
        --input datasets/Market-1501-v15.09.15/query --output logs/demo/query_feats \
        MODEL.WEIGHTS logs/demo/model_final.pth

writes ``OUT/features.npy`` (N x D float32; ``--format pt`` or ``both`` for ``features.pt``) and
``OUT/files.txt`` (row i is line i), through fixed-size shards in ``OUT/shards/``: run the same
command again after an interruption and the finished shards are skipped.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from fastreid.cli.entry import tool_entry_point
from fastreid.config.locate import resolve_config_file

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
    parser.add_argument("--batch-size", type=int, default=None, help="default TEST.IMS_PER_BATCH")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace an extraction of other inputs in --output"
    )
    parser.add_argument(
        "opts", default=[], nargs=argparse.REMAINDER, help="config overrides: KEY VALUE pairs"
    )
    return parser


def main(args: argparse.Namespace) -> int:
    import torch.nn.functional as F
    from tqdm import tqdm

    from fastreid.inference.extractor import FeatureExtractor
    from fastreid.inference.inputs import list_image_files
    from fastreid.inference.shards import FeatureStore

    files = [os.path.abspath(p) for p in list_image_files(args.input)]
    extractor = FeatureExtractor(
        config_file=args.config_file, device=args.device, opts=args.opts, batch_size=args.batch_size
    )
    settings = {
        "weights": os.path.abspath(extractor.cfg.MODEL.WEIGHTS) if extractor.cfg.MODEL.WEIGHTS else "",
        "normalize": bool(args.normalize),
        "flip": extractor.flip,
        "size_test": list(extractor.cfg.INPUT.SIZE_TEST),
    }
    store = FeatureStore(args.output, files, args.shard_size, settings, overwrite=args.overwrite)
    pending = store.pending_files()
    done = len(files) - len(pending)
    if done:
        logger.info(
            "Resuming: %d of %d shards already finished (%d images)",
            store.num_shards - len(store.pending_shards()),
            store.num_shards,
            done,
        )
    if pending:
        batches = extractor.iter_path_features(pending)
        if args.normalize:
            batches = ((paths, F.normalize(feats, dim=1)) for paths, feats in batches)
        with tqdm(total=len(files), initial=done, desc="features", unit="img", dynamic_ncols=True) as bar:
            store.write(batches, on_rows=bar.update)
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
