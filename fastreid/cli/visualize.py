"""Pictures of a trained model on a test set: rank lists, CMC, ROC, distance histogram (PNG files).

    fastreid-visualize --config-file configs/Market1501/bagtricks_R50.yml \
        --output logs/market/vis --num-vis 50 --rank-sort ascending --max-rank 10 \
        MODEL.WEIGHTS logs/market/model_final.pth

(``python tools/visualize_result.py ...`` in a checkout.)

Rank lists show the query, then its top ``--max-rank`` gallery images with a green border for a true
match and red for a false one; ``--rank-sort ascending`` draws the queries with the lowest AP first.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from fastreid.config import get_cfg, validate_config
from fastreid.config.locate import resolve_config_file
from fastreid.utils.errors import run_tool
from fastreid.utils.logger import setup_logger

__all__ = ["get_parser", "main", "run"]


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="Visualise re-ID results (rank lists, CMC, ROC, histograms)")
    parser.add_argument(
        "--config-file",
        required=True,
        metavar="FILE",
        type=resolve_config_file,
        help="path to the config file",
    )
    parser.add_argument(
        "--dataset-name", default=None, help="test set (default: the first of DATASETS.TESTS)"
    )
    parser.add_argument("--output", default=None, help="output directory (default: OUTPUT_DIR/visualize)")
    parser.add_argument("--num-vis", type=int, default=100, help="number of rank lists to draw")
    parser.add_argument(
        "--rank-sort",
        default="ascending",
        choices=["ascending", "descending", "none"],
        help="draw the queries with the lowest AP first (ascending), the highest, or in order",
    )
    parser.add_argument("--max-rank", type=int, default=10, help="gallery images per rank list")
    parser.add_argument(
        "--trust-checkpoint",
        action="store_true",
        help="allow weights files that need full unpickling (can run code from the file)",
    )
    parser.add_argument(
        "opts", default=[], nargs=argparse.REMAINDER, help="config overrides: KEY VALUE pairs"
    )
    return parser


def main(args: argparse.Namespace) -> dict:
    # these import torch (and matplotlib): only once the arguments are good
    from fastreid.data.build import build_reid_test_loader
    from fastreid.evaluation.visualize import write_evaluation_pictures  # torch, as above
    from fastreid.inference.extractor import features_of_loader  # torch, as above
    from fastreid.modeling import build_model  # torch, as above
    from fastreid.utils.checkpoint import Checkpointer  # torch, as above
    from fastreid.utils.safe_load import set_checkpoint_trust  # torch, as above

    logger = setup_logger(name="fastreid")
    cfg = get_cfg()
    cfg.merge_from_file(args.config_file)
    cfg.merge_from_list(args.opts)
    if args.trust_checkpoint:
        cfg.MODEL.TRUST_CHECKPOINT = True
    validate_config(cfg)
    set_checkpoint_trust(cfg.MODEL.TRUST_CHECKPOINT)
    cfg.freeze()
    if not cfg.MODEL.WEIGHTS:
        logger.warning("MODEL.WEIGHTS is empty: visualising an untrained model")
    model = build_model(cfg)
    Checkpointer(model, strict_load=cfg.MODEL.WEIGHTS_STRICT).load(cfg.MODEL.WEIGHTS)
    dataset_name = args.dataset_name or cfg.DATASETS.TESTS[0]
    loader, num_query = build_reid_test_loader(cfg, dataset_name=dataset_name)
    feats, pids, camids, paths = features_of_loader(model, loader, flip=cfg.TEST.FLIP.ENABLED, progress=True)
    out_dir = args.output or os.path.join(cfg.OUTPUT_DIR, "visualize", dataset_name)
    written = write_evaluation_pictures(
        feats[:num_query],
        feats[num_query:],
        pids[:num_query],
        pids[num_query:],
        camids[:num_query],
        camids[num_query:],
        paths[:num_query],
        paths[num_query:],
        out_dir,
        metric=cfg.TEST.METRIC,
        num_vis=args.num_vis,
        rank_sort=args.rank_sort,
        max_rank=args.max_rank,
    )
    logging.getLogger("fastreid").info(
        "Wrote %d rank lists and the CMC / ROC / histogram pictures to %s",
        len(written["rank_lists"]),
        out_dir,
    )
    return written


def run(argv: list[str] | None = None) -> int:
    """The entry point of ``fastreid-visualize`` and ``tools/visualize_result.py``; the exit code."""
    args = get_parser().parse_args(argv)
    return run_tool(lambda: main(args))


if __name__ == "__main__":
    sys.exit(run())
