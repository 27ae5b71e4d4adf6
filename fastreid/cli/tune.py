"""Search hyper-parameters on Ray Tune (upstream FastReID's FastTune, as a command).

    fastreid-tune --config-file configs/Market1501/bagtricks_R50.yml --space search.yml \\
        --num-samples 16 --metric mAP --output logs/tune --name market_bot
    fastreid-tune ... --name market_bot --resume          # continue after Ctrl-C or a crash
    fastreid-tune ... --address ray://head:10001          # on a running Ray cluster

``--space`` is a YAML file of config keys and distributions (``fastreid.tune.space``). Every trial
is a training run of this project; ASHA stops poor trials early (``--scheduler fifo`` does not),
Optuna or HyperOpt choose the next values when installed. Writes ``best_config.yaml`` (train it
with fastreid-train), ``trials.csv`` and a plot of the metric against each searched key to
``<output>/<name>``. Needs the 'tune' extra: pip install "fastreid[tune]".
"""

from __future__ import annotations

import argparse
import sys

from fastreid.config.locate import resolve_config_file
from fastreid.utils.errors import run_tool
from fastreid.utils.logger import setup_logger
from fastreid.utils.threads import configure_openmp

__all__ = ["parse_args", "run"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config-file", required=True, type=resolve_config_file, help="the base config")
    parser.add_argument("--space", required=True, help="the search space (YAML: config key -> distribution)")
    parser.add_argument("--metric", default="mAP", help="evaluation metric to optimise (default mAP)")
    parser.add_argument("--mode", default="max", choices=["max", "min"])
    parser.add_argument("--num-samples", type=int, default=8, help="trials (default 8)")
    parser.add_argument(
        "--scheduler", default="asha", choices=["asha", "fifo"], help="asha stops poor trials early"
    )
    parser.add_argument("--searcher", default="auto", choices=["auto", "optuna", "hyperopt", "random"])
    parser.add_argument(
        "--grace-period", type=int, default=1, help="evaluations before a trial may be stopped"
    )
    parser.add_argument("--cpus-per-trial", type=int, default=None, help="CPUs per trial (default 1)")
    parser.add_argument(
        "--max-concurrent", type=int, default=None, help="trials at once (default: CPUs / per trial)"
    )
    parser.add_argument("--output", default="logs/tune", help="where searches live (default logs/tune)")
    parser.add_argument("--name", default="search", help="this search's folder under --output")
    parser.add_argument(
        "--address", default=None, help="a running Ray cluster (default: Ray on this machine)"
    )
    parser.add_argument("--resume", action="store_true", help="continue the search in <output>/<name>")
    parser.add_argument("--seed", type=int, default=0, help="the searcher's seed")
    parser.add_argument(
        "opts", nargs="*", default=[], help="config overrides for every trial (KEY VALUE ...)"
    )
    return parser.parse_args(argv)


def run(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_openmp()  # before torch is imported: OpenMP reads its wait policy when loaded
    # imports torch: after the OpenMP decision, and once the arguments are good (--help is quick)
    from fastreid.tune import SearchOptions, run_search

    setup_logger()
    options = SearchOptions(
        config_file=args.config_file, space_file=args.space, opts=args.opts, metric=args.metric,
        mode=args.mode, num_samples=args.num_samples, scheduler=args.scheduler, searcher=args.searcher,
        grace_period=args.grace_period, cpus_per_trial=args.cpus_per_trial,
        max_concurrent=args.max_concurrent, output=args.output, name=args.name, address=args.address,
        resume=args.resume, seed=args.seed,
    )  # fmt: skip

    def main() -> int:
        result = run_search(options)
        print(f"best {args.metric}: {result.best_metrics[args.metric]:.4g} with {result.best_params}")
        print(f"ready-to-train config: {result.best_config}")
        print(f"all trials: {result.table}; plots: {', '.join(result.plots)}")
        return 0

    return run_tool(main)


if __name__ == "__main__":
    sys.exit(run())
