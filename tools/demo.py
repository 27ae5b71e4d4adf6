#!/usr/bin/env python
"""``make demo`` and ``make demo-*``: a task family's whole pipeline on a CPU in minutes, no download.

1. make the family's synthetic data set(s) under ``--root`` (each kept when it already exists);
2. choose the run folder: the first run goes to ``--output``, each later one beside it
   (``<output>-YYYYmmdd-HHMMSS``); the newest of them is resumed when it holds an interrupted run
   (:func:`fastreid.engine.run_dir.choose_run_folder`, one line says which), so running the same
   command again continues a run that a signal, a crash or a power cut stopped;
3. train and evaluate the family's demo config(s) with ``fastreid-train``'s code (the distillation
   demo: its teacher, then the student distilled from the teacher's ``config.yaml`` and weights;
   the domain-adaptation demo: a source model on domain A, that model adapted to domain B's
   unlabelled images, and a model on B's labels, all evaluated on B and printed as one table);
4. re-ID (``--family reid``, ``make demo``): the untrained model's evaluation first, rank-list
   pictures of the trained model after;
5. print where everything is, and last the path of the run report (``report.html``).

    python tools/demo.py --root datasets --output logs/demo [KEY VALUE ...]
    python tools/demo.py --family attr --root datasets --output logs/demo_attr
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from typing import NamedTuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from fastreid.utils.errors import UserError, run_tool  # noqa: E402  (after the checkout is on sys.path)


class DataSet(NamedTuple):
    """A synthetic set of a demo: a path under ``--root`` that exists once the set is there, its
    generator (a module with ``main(argv)``) and the generator's arguments beyond ``--root``."""

    marker: str
    module: str
    argv: tuple[str, ...] = ()


MARKET = DataSet("Market-1501-v15.09.15/bounding_box_train", "fastreid.data.synthetic.persons")
DUKE = DataSet("DukeMTMC-reID/bounding_box_train", "fastreid.data.synthetic.persons", ("--domain", "B"))


class Stage(NamedTuple):
    """One training run of a demo: its config (relative to the checkout), its sub-folder of the
    run folder ("" for the run folder itself), the stage it distils from and the stage whose final
    weights it starts from ("" for none), and its row name in the demo's closing table ("": no
    table)."""

    config: str
    folder: str = ""
    teacher: str = ""
    weights: str = ""
    label: str = ""


class Demo(NamedTuple):
    data: tuple[DataSet, ...]
    stages: tuple[Stage, ...]
    doc: str


DEMOS = {
    "reid": Demo((MARKET,), (Stage("configs/Demo/bagtricks_demo.yml"),), "README.md"),
    "attr": Demo(
        (DataSet("PA-100K/annotation.mat", "fastreid.data.synthetic.attributes"),),
        (Stage("configs/Attr/pa100_demo.yml"),),
        "docs/attributes.md",
    ),
    "partial": Demo(
        (MARKET, DataSet("OccludedREID", "fastreid.data.synthetic.partial")),
        (Stage("configs/PartialReID/partial_market_demo.yml"),),
        "docs/partial.md",
    ),
    "distill": Demo(
        (MARKET,),
        (
            Stage("configs/Distill/demo_teacher.yml", "teacher"),
            Stage("configs/Distill/demo_student.yml", "student", teacher="teacher"),
        ),
        "docs/distillation.md",
    ),
    "retri": Demo(
        (DataSet("CUB_200_2011/train.txt", "fastreid.data.synthetic.retrieval"),),
        (Stage("configs/Retri/cub_demo.yml"),),
        "docs/retrieval.md",
    ),
    "face": Demo(
        (DataSet("faces_emore_val/lfw/pairs.txt", "fastreid.data.synthetic.faces"),),
        (Stage("configs/Face/face_demo.yml"),),
        "docs/face.md",
    ),
    "clas": Demo(
        (DataSet("hymenoptera_data/train", "fastreid.data.synthetic.classes"),),
        (Stage("configs/Clas/base-clas_demo.yml"),),
        "docs/classification.md",
    ),
    # domain adaptation: A is the synthetic Market-1501, B the synthetic DukeMTMC-reID (other
    # scenes, light, palette and cameras); every stage is evaluated on B
    "uda": Demo(
        (MARKET, DUKE),
        (
            Stage("configs/UDA/demo_source.yml", "source", label="direct transfer (domain A's labels)"),
            Stage(
                "configs/UDA/demo_adapt.yml",
                "adapted",
                weights="source",
                label="adapted (+ domain B's images, no labels)",
            ),
            Stage("configs/UDA/demo_supervised.yml", "supervised", label="supervised (domain B's labels)"),
        ),
        "docs/uda.md",
    ),
}
UNTRAINED = "untrained"  # the re-ID demo's evaluation of the untrained model, in the run folder


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from fastreid.config.locate import resolve_config_file

    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--family", default="reid", choices=sorted(DEMOS), help="which demo (default reid)")
    parser.add_argument(
        "--root",
        default=os.environ.get("FASTREID_DATASETS", "datasets"),
        help="datasets folder; the synthetic sets go under it",
    )
    parser.add_argument(
        "--output",
        default=None,
        help="the first run's folder; later runs go beside it (default logs/demo...)",
    )
    parser.add_argument(
        "--config-file", default=None, type=resolve_config_file, help="another config for a one-stage demo"
    )
    parser.add_argument("--num-pictures", type=int, default=8, help="re-ID queries drawn as rank lists")
    parser.add_argument(
        "opts", nargs=argparse.REMAINDER, help="config overrides as KEY VALUE pairs, every stage"
    )
    args = parser.parse_args(argv)
    if args.output is None:
        args.output = os.path.join("logs", "demo" if args.family == "reid" else f"demo_{args.family}")
    return args


class Steps:
    def __init__(self, total: int) -> None:
        self.total, self.done, self.start = total, 0, time.perf_counter()

    def banner(self, text: str) -> None:
        self.done += 1
        elapsed = time.perf_counter() - self.start
        print(f"\n=== [{self.done}/{self.total}] {text}  (t={elapsed:.0f}s)", flush=True)


def ensure_data(root: str, demo: Demo) -> list[str]:
    """Each synthetic set of the demo under ``root``, generated when missing; their folders."""
    folders = []
    for marker, module, extra in demo.data:
        path = os.path.join(root, marker)
        folder = os.path.join(root, marker.split("/")[0])
        folders.append(folder)
        present = (
            os.path.isdir(path) and any(os.scandir(path)) if os.path.isdir(path) else os.path.isfile(path)
        )
        if present:
            print(f"Using the existing data set in {folder}", flush=True)
            continue
        print(f"Generating the synthetic data set in {folder} ...", flush=True)
        if importlib.import_module(module).main(["--root", root, *extra]):
            raise UserError(f"Could not generate the synthetic data set in {folder} (see above)")
    return folders


def stage_argv(args: argparse.Namespace, stage: Stage, run: str, resume: bool) -> list[str]:
    """``fastreid-train``'s command line of one stage of the run in folder ``run``."""
    config = args.config_file or os.path.join(REPO, stage.config)
    teacher = []
    if stage.teacher:
        source = os.path.join(run, stage.teacher)
        teacher = [
            "KD.MODEL_CONFIG",
            f"({os.path.join(source, 'config.yaml')!r},)",
            "KD.MODEL_WEIGHTS",
            f"({os.path.join(source, 'model_final.pth')!r},)",
        ]
    weights = ["MODEL.WEIGHTS", os.path.join(run, stage.weights, "model_final.pth")] if stage.weights else []
    output = os.path.join(run, stage.folder) if stage.folder else run
    return [
        "--config-file",
        config,
        *(["--resume"] if resume else []),
        *teacher,
        *weights,
        *args.opts,
        "OUTPUT_DIR",
        output,
    ]


def read_results(folder: str) -> dict:
    from fastreid.evaluation.reid_evaluation import RESULTS_FILE

    try:
        with open(os.path.join(folder, RESULTS_FILE), encoding="utf-8") as f:
            return dict(json.load(f))
    except (OSError, ValueError):
        return {}


def evaluate_untrained(argv: list[str], folder: str) -> dict:
    """The untrained model's metrics, evaluated once per run (kept in ``<run>/untrained``)."""
    from fastreid.cli.train import load_config
    from fastreid.engine import DefaultTrainer, default_argument_parser
    from fastreid.utils.logger import setup_logger
    from fastreid.utils.rng import rng_isolated

    results = read_results(folder)
    if results:
        return results
    args = default_argument_parser().parse_args(argv)
    cfg = load_config(args)
    cfg.OUTPUT_DIR = folder
    cfg.MODEL.BACKBONE.PRETRAIN = False
    cfg.freeze()
    setup_logger()
    with rng_isolated():  # the training run that follows draws the same numbers as without it
        model = DefaultTrainer.build_model(cfg)
        return dict(DefaultTrainer.test(cfg, model))


def draw_rank_lists(argv: list[str], run: str, out_dir: str, num_queries: int) -> str:
    """Rank lists of the first queries, CMC, ROC and distance histogram of the trained model
    (``run/model_final.pth``) on the first test set; returns the rank-list folder."""
    from fastreid.cli.train import load_config
    from fastreid.data.build import build_reid_test_loader
    from fastreid.engine import DefaultTrainer, default_argument_parser
    from fastreid.engine.defaults import num_classes_in_checkpoint
    from fastreid.evaluation.visualize import write_evaluation_pictures
    from fastreid.inference.extractor import features_of_loader
    from fastreid.utils.checkpoint import Checkpointer

    weights = os.path.join(run, "model_final.pth")
    cfg = load_config(default_argument_parser().parse_args(argv))
    cfg.MODEL.BACKBONE.PRETRAIN = False
    cfg.MODEL.HEADS.NUM_CLASSES = num_classes_in_checkpoint(weights) or 1
    model = DefaultTrainer.build_model(cfg)
    Checkpointer(model).load(weights)
    loader, num_query = build_reid_test_loader(cfg, dataset_name=cfg.DATASETS.TESTS[0])
    try:
        feat, pid, camid, paths = features_of_loader(model, loader, flip=cfg.TEST.FLIP.ENABLED)
    finally:
        shutdown = getattr(loader, "shutdown", None)
        if callable(shutdown):
            shutdown()
    q = num_query
    written = write_evaluation_pictures(
        feat[:q], feat[q:], pid[:q], pid[q:], camid[:q], camid[q:], paths[:q], paths[q:], out_dir,
        metric=cfg.TEST.METRIC, num_vis=num_queries,
        rank_sort="none",  # the first queries: an honest sample, neither best nor worst
    )  # fmt: skip
    return os.path.dirname(written["rank_lists"][0]) if written["rank_lists"] else out_dir


def main(argv: list[str] | None = None) -> int:
    from fastreid.utils.resume_hint import recorded

    args = parse_args(argv)
    # Running the same command again continues an interrupted run: that is what a stop prints.
    with recorded(resume_flag=False):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from fastreid.cli import train
    from fastreid.engine.run_dir import choose_run_folder
    from fastreid.utils.env import setup_environment

    demo = DEMOS[args.family]
    reid = args.family == "reid"
    if args.config_file and len(demo.stages) > 1:
        raise UserError(
            f"--config-file replaces a demo's one config; the {args.family} demo has {len(demo.stages)}"
        )
    setup_environment()
    os.environ["FASTREID_DATASETS"] = args.root  # where the loaders look for the data sets
    steps = Steps(5 if reid else 3)

    steps.banner("Synthetic data")
    data = ensure_data(args.root, demo)
    folder = choose_run_folder(args.output, [s.folder for s in demo.stages])
    print(folder.line, flush=True)
    run = folder.path

    untrained: dict = {}
    if reid:
        steps.banner("Evaluating the untrained model")
        untrained = evaluate_untrained(
            stage_argv(args, demo.stages[0], run, False), os.path.join(run, UNTRAINED)
        )
        print(
            f"untrained model: Rank-1 {rank1(untrained):.1f}%  mAP {untrained.get('mAP', float('nan')):.1f}%"
        )

    steps.banner(
        f"Training {', '.join(s.config if not args.config_file else args.config_file for s in demo.stages)}"
    )
    for stage in demo.stages:
        code = train.run(stage_argv(args, stage, run, folder.resume))
        if code:
            return code
    last = os.path.join(run, demo.stages[-1].folder) if demo.stages[-1].folder else run
    trained = read_results(last)

    out = os.path.abspath(run)
    if reid:
        steps.banner("Rank-list pictures")
        pictures_dir = os.path.join(run, "pictures")
        pictures = draw_rank_lists(
            stage_argv(args, demo.stages[0], run, False), run, pictures_dir, args.num_pictures
        )

    steps.banner("Summary")
    for name in data:
        print(f"data set        : {os.path.abspath(name)}")
    print(f"run folder      : {out}")
    for stage in demo.stages:
        where = os.path.abspath(os.path.join(run, stage.folder)) if stage.folder else out
        label = f" ({stage.folder})" if stage.folder else ""
        print(f"config used{label:<5}: {os.path.join(where, 'config.yaml')}")
        print(f"final model{label:<5}: {os.path.join(where, 'model_final.pth')}")
    print(f"log, metrics    : {os.path.join(os.path.abspath(last), 'log.txt')}, metrics.json")
    if reid:
        print(f"rank lists      : {os.path.abspath(pictures)}")
        print(f"CMC / ROC plots : {os.path.abspath(pictures_dir)}")
        print(
            f"mAP             : {untrained.get('mAP', float('nan')):.1f}% -> {trained.get('mAP', float('nan')):.1f}%"
        )
        print(f"untrained Rank-1 {rank1(untrained):.1f}% -> trained Rank-1 {rank1(trained):.1f}%")
    elif not any(stage.label for stage in demo.stages):
        shown = {k: v for k, v in trained.items() if isinstance(v, (int, float))}
        print("results         : " + "  ".join(f"{k} {v:.2f}" for k, v in shown.items()))
    print(f"more            : {demo.doc}")
    print(f"total time      : {time.perf_counter() - steps.start:.0f} s", flush=True)
    if any(stage.label for stage in demo.stages):
        print("\n" + stage_table(run, demo), flush=True)
    print(report_line(last), flush=True)
    return 0


def stage_table(run: str, demo: Demo) -> str:
    """Rank-1 and mAP of each labelled stage's final evaluation (the UDA demo: all on domain B)."""
    from tabulate import tabulate

    rows = []
    for stage in demo.stages:
        if stage.label:
            results = read_results(os.path.join(run, stage.folder))
            rows.append([stage.label, rank1(results), float(results.get("mAP", float("nan")))])
    return tabulate(
        rows, headers=["model, evaluated on domain B", "Rank-1", "mAP"], tablefmt="pipe", floatfmt=".1f"
    )


def rank1(results: dict) -> float:
    return float(results.get("Rank-1", float("nan")))


def report_line(output_dir: str) -> str:
    """The demo's last line: where its report is (written at the end of training)."""
    from fastreid.report import REPORT_FILE

    report = os.path.join(output_dir, REPORT_FILE)
    if os.path.isfile(report):
        return f"Report: {os.path.abspath(report)}"
    return f"Report: not written (TEST.REPORT False, or see the log); write it with: fastreid-report {output_dir}"


if __name__ == "__main__":
    sys.exit(run_tool(main))
