"""Build the decoded-image cache (DATALOADER.CACHE) ahead of training, with a progress bar.

    fastreid-build-cache --config-file configs/Market1501/bagtricks_R50.yml
    fastreid-build-cache INPUT.SIZE_TRAIN "[256, 128]" DATASETS.NAMES "('Market1501',)"

(``python tools/build_cache.py ...`` in a checkout.)

Caches the training sets (DATASETS.NAMES at INPUT.SIZE_TRAIN) and the test sets
(DATASETS.TESTS at INPUT.SIZE_TEST). Up-to-date caches are left alone; stale ones (files,
sizes or list changed) are rebuilt. Datasets are read from $FASTREID_DATASETS (default datasets).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from fastreid.config import ConfigError, get_cfg, validate_config
from fastreid.config.locate import resolve_config_file
from fastreid.utils.errors import run_tool
from fastreid.utils.threads import configure_openmp


def _jobs(cfg, which: str) -> list[tuple[str, list[str], list[int] | None]]:
    # the data package imports torch: after the OpenMP decision in main(), once the arguments are good
    from fastreid.data.build import datasets_root
    from fastreid.data.datasets import DATASET_REGISTRY  # torch, as above
    from fastreid.data.transforms import input_size  # torch, as above

    jobs = []
    if which in ("train", "all"):
        paths = []
        for name in cfg.DATASETS.NAMES:
            paths += [
                item[0]
                for item in DATASET_REGISTRY.get(name)(
                    root=datasets_root(), combineall=cfg.DATASETS.COMBINEALL
                ).train
            ]
        jobs.append(("train: " + "+".join(cfg.DATASETS.NAMES), paths, input_size(cfg, True)))
    if which in ("test", "all"):
        for name in cfg.DATASETS.TESTS:
            data = DATASET_REGISTRY.get(name)(root=datasets_root())
            jobs.append((f"test: {name}", [i[0] for i in data.query + data.gallery], input_size(cfg, False)))
    return jobs


__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """The entry point of ``fastreid-build-cache`` and ``tools/build_cache.py``; the exit code."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--config-file",
        default="",
        type=resolve_config_file,
        help="YAML config (default: the built-in defaults)",
    )
    parser.add_argument("--splits", choices=("train", "test", "all"), default="all")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("opts", nargs=argparse.REMAINDER, help="KEY VALUE config overrides")
    args = parser.parse_args(argv)
    configure_openmp()  # before torch is imported: OpenMP reads its wait policy when loaded
    return run_tool(lambda: _build(args))


def _build(args: argparse.Namespace) -> int:
    """Config errors exit 2, a missing data set 1, each with one line on stderr (``run_tool``)."""
    from fastreid.data.cache import DecodedCache  # torch: after the OpenMP decision in main()

    cfg = get_cfg()
    if args.config_file:
        cfg.merge_from_file(args.config_file)
    cfg.merge_from_list(args.opts)
    validate_config(cfg)
    jobs = _jobs(cfg, args.splits)
    for label, paths, size in jobs:
        if size is None or len(size) != 2:
            raise ConfigError(f"{label}: the cache needs INPUT.SIZE_TRAIN/SIZE_TEST as [height, width]")
        cache = DecodedCache(paths, size, cfg.DATALOADER.CACHE_DIR or None)
        t0 = time.perf_counter()
        built = cache.ensure(progress=not args.no_progress)
        state = f"built in {time.perf_counter() - t0:.1f} s" if built else "up to date"
        mb = os.path.getsize(cache.data_file) / 2**20
        print(
            f"{label}: {len(paths)} images at {size[0]}x{size[1]} -> {cache.data_file} ({mb:.0f} MB), {state}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
