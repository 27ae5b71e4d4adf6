#!/usr/bin/env python
"""``make demo``: the whole pipeline on a CPU in a few minutes, no download.

1. make the synthetic Market-1501 under ``--root`` (kept when it already exists);
2. evaluate the untrained model;
3. train ``configs/Demo/bagtricks_demo.yml``;
4. evaluate the trained model and draw rank lists;
5. print where everything is and "untrained Rank-1 X% -> trained Rank-1 Y%", and last the path of
   the run report (report.html, written at the end of training: open it in a browser).

    python tools/demo.py --root datasets --output logs/demo [KEY VALUE ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

STEPS = 5


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from fastreid.config.locate import resolve_config_file

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--root",
        default=os.environ.get("FASTREID_DATASETS", "datasets"),
        help="datasets folder; the synthetic set goes to <root>/Market-1501-v15.09.15",
    )
    parser.add_argument("--output", default="logs/demo", help="OUTPUT_DIR of the run")
    parser.add_argument(
        "--config-file",
        default=os.path.join(REPO, "configs", "Demo", "bagtricks_demo.yml"),
        type=resolve_config_file,
    )
    parser.add_argument("--num-pictures", type=int, default=8, help="queries drawn as rank lists")
    parser.add_argument("opts", nargs=argparse.REMAINDER, help="config overrides as KEY VALUE pairs")
    return parser.parse_args(argv)


def banner(n: int, text: str, start: float) -> None:
    print(f"\n=== [{n}/{STEPS}] {text}  (t={time.perf_counter() - start:.0f}s)", flush=True)


def ensure_synthetic_data(root: str) -> str:
    """The synthetic Market-1501 folder, generated when missing."""
    from fastreid.data.synthetic.persons import FOLDER, SyntheticSpec, generate_market1501

    folder = os.path.join(root, FOLDER)
    train_dir = os.path.join(folder, "bounding_box_train")
    if os.path.isdir(train_dir) and any(name.endswith(".jpg") for name in os.listdir(train_dir)):
        print(f"Using the existing data set in {folder}", flush=True)
        return folder
    print(f"Generating the synthetic Market-1501 in {folder} ...", flush=True)
    return generate_market1501(root, SyntheticSpec(), overwrite=False, verbose=True)


def rank1(results: dict) -> float:
    return float(results.get("Rank-1", float("nan")))


def draw_rank_lists(cfg, model, out_dir: str, num_queries: int) -> str:
    """Rank lists of the first queries, CMC, ROC and distance histogram of ``model`` on the first
    test set, via ``fastreid.evaluation.visualize``; returns the rank-list folder."""
    from fastreid.data.build import build_reid_test_loader
    from fastreid.evaluation.visualize import write_evaluation_pictures
    from fastreid.inference.extractor import features_of_loader
    from fastreid.utils.checkpoint import unwrap_model

    model = unwrap_model(model)
    loader, num_query = build_reid_test_loader(cfg, dataset_name=cfg.DATASETS.TESTS[0])
    try:
        feat, pid, camid, paths = features_of_loader(model, loader, flip=cfg.TEST.FLIP.ENABLED)
    finally:
        shutdown = getattr(loader, "shutdown", None)
        if callable(shutdown):
            shutdown()
    written = write_evaluation_pictures(
        feat[:num_query],
        feat[num_query:],
        pid[:num_query],
        pid[num_query:],
        camid[:num_query],
        camid[num_query:],
        paths[:num_query],
        paths[num_query:],
        out_dir,
        metric=cfg.TEST.METRIC,
        num_vis=num_queries,
        rank_sort="none",  # the first queries: an honest sample, neither best nor worst
    )
    return os.path.dirname(written["rank_lists"][0]) if written["rank_lists"] else out_dir


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from fastreid.utils.env import setup_environment

    setup_environment()
    os.environ["FASTREID_DATASETS"] = args.root  # where the loaders look for Market-1501
    start = time.perf_counter()

    banner(1, "Synthetic Market-1501", start)
    data_dir = ensure_synthetic_data(args.root)

    from fastreid.config import get_cfg
    from fastreid.engine import DefaultTrainer, default_setup
    from fastreid.utils.rng import rng_isolated

    cfg = get_cfg()
    cfg.merge_from_file(args.config_file)
    cfg.merge_from_list(args.opts or [])
    cfg.OUTPUT_DIR = args.output
    default_setup(cfg, args)
    cfg.freeze()

    banner(2, "Evaluating the untrained model", start)
    trainer = DefaultTrainer(cfg)
    trainer.resume_or_load(resume=False)
    with rng_isolated():  # the extra evaluation leaves the training run unchanged
        untrained = DefaultTrainer.test(trainer.cfg, trainer.model)
    trainer.model.train()
    print(
        f"untrained model: Rank-1 {rank1(untrained):.1f}%  mAP {untrained.get('mAP', float('nan')):.1f}%",
        flush=True,
    )

    banner(3, f"Training ({trainer.max_iter} iterations, {trainer.max_epoch} epochs)", start)
    trained = trainer.train() or {}

    banner(4, "Rank-list pictures", start)
    pictures_dir = os.path.join(args.output, "pictures")
    pictures = draw_rank_lists(trainer.cfg, trainer.model, pictures_dir, args.num_pictures)

    banner(5, "Summary", start)
    out = os.path.abspath(args.output)
    print(f"data set        : {os.path.abspath(data_dir)}")
    print(f"config used     : {os.path.join(out, 'config.yaml')}")
    print(f"log             : {os.path.join(out, 'log.txt')}")
    print(f"metrics (JSON)  : {os.path.join(out, 'metrics.json')}")
    print(f"final model     : {os.path.join(out, 'model_final.pth')}")
    print(f"rank lists      : {os.path.abspath(pictures)}")
    print(f"CMC / ROC plots : {os.path.abspath(pictures_dir)}")
    print(
        f"mAP             : {untrained.get('mAP', float('nan')):.1f}% -> {trained.get('mAP', float('nan')):.1f}%"
    )
    print(f"untrained Rank-1 {rank1(untrained):.1f}% -> trained Rank-1 {rank1(trained):.1f}%")
    print(f"total time      : {time.perf_counter() - start:.0f} s", flush=True)
    print(report_line(trainer), flush=True)
    return 0


def report_line(trainer) -> str:
    """The demo's last line: where its report is (written by the trainer at the end of training)."""
    if trainer.report_path:
        return f"Report: {trainer.report_path}"
    if not trainer.cfg.TEST.REPORT:
        return "Report: not written (TEST.REPORT is False)"
    return f"Report: not written (see the warning above); write it with: fastreid-report {trainer.cfg.OUTPUT_DIR}"


if __name__ == "__main__":
    from fastreid.utils.errors import run_tool

    sys.exit(run_tool(main))
