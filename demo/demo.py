#!/usr/bin/env python
"""Upstream FastReID's ``demo/demo.py``, kept for scripts that call it: one ``.npy`` file of
L2-normalised features per input image.

    python demo/demo.py --config-file logs/demo/config.yaml --input crops/*.jpg --output demo_output \
        --opts MODEL.WEIGHTS logs/demo/model_final.pth

As upstream, ``OUTPUT/<image name without extension>.npy`` holds a 1 x D float32 array. Unlike
upstream, images go through the evaluation's test transforms (the same features as
``tools/train_net.py --eval-only``). For many images use ``tools/extract_features.py`` (one
feature file, resumable).
"""

from __future__ import annotations

import argparse
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def get_parser() -> argparse.ArgumentParser:
    from fastreid.config.locate import resolve_config_file

    parser = argparse.ArgumentParser(description="Feature extraction with reid models")
    parser.add_argument(
        "--config-file", metavar="FILE", required=True, type=resolve_config_file, help="path to config file"
    )
    parser.add_argument(
        "--parallel",
        action="store_true",
        help="accepted for compatibility; DATALOADER.NUM_WORKERS decodes images in parallel",
    )
    parser.add_argument(
        "--input",
        nargs="+",
        required=True,
        help="image files, folders, or glob patterns such as 'directory/*.jpg'",
    )
    parser.add_argument("--output", default="demo_output", help="folder for the .npy feature files")
    parser.add_argument(
        "--opts", default=[], nargs=argparse.REMAINDER, help="config overrides as KEY VALUE pairs"
    )
    return parser


def main(args: argparse.Namespace) -> int:
    import numpy as np
    import torch
    from tqdm import tqdm

    from fastreid.inference import FeatureExtractor, list_image_files

    files = list_image_files(args.input)
    extractor = FeatureExtractor(config_file=args.config_file, opts=args.opts)
    os.makedirs(args.output, exist_ok=True)
    with tqdm(total=len(files), desc="features", unit="img") as bar:
        for paths, feats in extractor.iter_path_features(files):
            feats = torch.nn.functional.normalize(feats, dim=1)  # as upstream: for cosine similarity
            for path, feat in zip(paths, feats):
                name = os.path.basename(path).split(".")[0]
                np.save(os.path.join(args.output, name + ".npy"), feat[None].numpy())
            bar.update(len(paths))
    print(f"wrote {len(files)} feature files to {os.path.abspath(args.output)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, REPO)
    from fastreid.utils.errors import run_tool
    from fastreid.utils.logger import setup_logger

    parsed = get_parser().parse_args()
    setup_logger(name="fastreid")
    sys.exit(run_tool(lambda: main(parsed)))
