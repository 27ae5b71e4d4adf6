"""Training step speed of the real trainer against a floor, on a quiet CPU and under a CPU hog.

Each cell runs in a fresh child process that starts like ``tools/train_net.py`` (the thread decision of
``fastreid/utils/threads.py`` before torch is imported), builds ``DefaultTrainer`` from
``configs/Market1501/bagtricks_R50.yml`` on a generated Market-1501 (128x64 images, batch 32, AMP off,
CPU, no pretrained weights) and times iterations after a warm-up: wall time and CPU seconds of the
process and its loader workers, median over the timed iterations. The **floor** is the least any
trainer must do: a torchvision ResNet (last stride 1) forward, cross-entropy, backward and Adam step
on fixed tensors of the same shape, in the same kind of child process.

Settings: model (R18, R50) x torch threads (1, 2) x loading (0 workers, 2 worker processes, 2 loader
threads) x machine (quiet, hog = two busy-loop processes this script starts and stops). Repetitions
are interleaved (every cell once, then again). ``--spin`` adds the cells with OpenMP's default
spinning (``GOMP_SPINCOUNT=300000``, what libgomp does when no policy is set) to show what the thread
decision changes; ``--spincounts`` other spin lengths. Targets, as ratios in one run: trainer / floor <= 1.05 quiet, <= 1.2 under the hog.

    python benchmarks/training.py            # the full matrix (long: run it on a quiet machine)
    python benchmarks/training.py --quick    # R18, 2 threads, 0 workers / 2 threads, quiet and hog
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

T_START = time.perf_counter()  # before any heavy import: start-up is measured from here
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

BATCH, SIZE = 32, (128, 64)
LOADERS = {"0 workers": (0, 0), "2 workers": (2, 0), "2 threads": (0, 2)}


def _cpu_seconds_with_children() -> float:
    """CPU seconds of this process and its live child processes (loader workers), Linux /proc."""
    tick = os.sysconf("SC_CLK_TCK")

    def stat(pid: int) -> float:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / tick
        except OSError:
            return 0.0

    total = time.process_time()
    try:
        for task in os.listdir(f"/proc/{os.getpid()}/task"):
            with open(f"/proc/{os.getpid()}/task/{task}/children", encoding="ascii") as f:
                total += sum(stat(int(p)) for p in f.read().split())
    except OSError:
        pass
    return total


def _report(times: list[float], cpus: list[float], warmup: int, first_iter_s: float) -> None:
    timed_t, timed_c = times[warmup:], cpus[warmup:]
    print(
        json.dumps(
            {
                "median_s": statistics.median(timed_t),
                "median_cpu_s": statistics.median(timed_c),
                "iters": len(timed_t),
                "first_iter_s": first_iter_s,
            }
        ),
        flush=True,
    )


def _step_timer(hook_base: type, args):
    """A hook timing each step (wall and CPU seconds); prints the report and exits the process once
    warm-up + timed iterations are done. ``hook_base``: the trainer's own HookBase (ours, upstream's)."""
    total = args.warmup + args.iters

    class StepTimer(hook_base):
        def __init__(self):
            self.times, self.cpus, self.first = [], [], None

        def before_step(self):
            self.t, self.c = time.perf_counter(), _cpu_seconds_with_children()

        def after_step(self):
            self.times.append(time.perf_counter() - self.t)
            self.cpus.append(_cpu_seconds_with_children() - self.c)
            if self.first is None:
                self.first = time.perf_counter() - T_START
            if len(self.times) == total:
                _report(self.times, self.cpus, args.warmup, self.first)
                os._exit(0)  # the numbers are out; skip the final checkpoint and evaluation

    return StepTimer()


def _common_opts(args, workers: int) -> list:
    """Config overrides both trainers (ours and upstream's) get: same model, sizes, batch, loader."""
    return [
        "MODEL.BACKBONE.DEPTH",
        args.depth,
        "MODEL.BACKBONE.PRETRAIN",
        False,
        "MODEL.DEVICE",
        "cpu",
        "MODEL.BACKBONE.FEAT_DIM",
        512 if args.depth in ("18x", "34x") else 2048,
        "INPUT.SIZE_TRAIN",
        list(SIZE),
        "INPUT.SIZE_TEST",
        list(SIZE),
        "SOLVER.IMS_PER_BATCH",
        BATCH,
        "SOLVER.AMP.ENABLED",
        False,
        "SOLVER.CHECKPOINT_PERIOD",
        1000,
        "TEST.EVAL_PERIOD",
        1000,
        "DATALOADER.NUM_WORKERS",
        workers,
        "OUTPUT_DIR",
        args.output_dir,
        "CUDNN_BENCHMARK",
        False,
    ]


def child_trainer(args) -> None:
    from fastreid.utils.threads import configure_openmp

    configure_openmp()
    from fastreid.config import get_cfg
    from fastreid.engine import DefaultTrainer
    from fastreid.engine.train_loop import HookBase
    from fastreid.utils.env import setup_environment

    setup_environment()
    workers, threads = LOADERS[args.loader]
    total = args.warmup + args.iters
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(ROOT, "configs", "Market1501", "bagtricks_R50.yml"))
    cfg.merge_from_list(
        _common_opts(args, workers)
        + ["SOLVER.MAX_ITER", total + 10, "SOLVER.LOG_PERIOD", 1000, "DATALOADER.NUM_THREADS", threads]
    )

    trainer = DefaultTrainer(cfg)
    trainer.register_hooks([_step_timer(HookBase, args)])
    trainer.train()


def child_upstream(args) -> None:
    """Upstream FastReID's own trainer from a checkout (``--upstream``), nothing of it copied here.
    Started as its ``tools/train_net.py`` starts it (no thread decision: upstream has none). Two
    shims make the 2021 code run on Python 3.11 and a CPU-only torch: ``collections.Mapping``
    aliases, and its loader's CUDA stream / ``set_device`` calls skipped (it keeps its background
    thread)."""
    import collections
    import collections.abc

    for name in ("Mapping", "MutableMapping", "Sequence", "Iterable"):
        setattr(collections, name, getattr(collections.abc, name))
    sys.path[:] = [args.upstream, *filter(None, (args.upstream_deps or "").split(os.pathsep))] + [
        p for p in sys.path if os.path.abspath(p or ".") != ROOT
    ]
    import torch

    if not torch.cuda.is_available():
        torch.cuda.set_device = lambda *a, **k: None
        import fastreid.data.build as upstream_build
        from fastreid.data.data_utils import BackgroundGenerator

        class CPULoaderX(torch.utils.data.DataLoader):
            def __init__(self, local_rank, **kwargs):
                super().__init__(**kwargs)
                self.local_rank = local_rank

            def __iter__(self):
                return BackgroundGenerator(super().__iter__(), self.local_rank)

        upstream_build.DataLoaderX = CPULoaderX
    from fastreid.config import get_cfg
    from fastreid.engine import DefaultTrainer
    from fastreid.engine.train_loop import HookBase

    assert os.path.abspath(sys.modules["fastreid"].__file__).startswith(os.path.abspath(args.upstream))
    workers, _ = LOADERS[args.loader]
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(args.upstream, "configs", "Market1501", "bagtricks_R50.yml"))
    cfg.merge_from_list(_common_opts(args, workers) + ["SOLVER.MAX_EPOCH", 1000])
    trainer = DefaultTrainer(cfg)
    trainer.register_hooks([_step_timer(HookBase, args)])
    trainer.train()


def child_floor(args) -> None:
    from fastreid.utils.threads import configure_openmp

    configure_openmp()
    import torch
    import torchvision

    from fastreid.utils.threads import configure_threads

    configure_threads()
    torch.manual_seed(0)
    depth = int(args.depth.rstrip("x"))
    model = getattr(torchvision.models, f"resnet{depth}")(num_classes=100)
    block = model.layer4[0]
    (block.conv2 if depth >= 50 else block.conv1).stride = (1, 1)  # last stride 1, as the re-ID backbone
    block.downsample[0].stride = (1, 1)
    opt = torch.optim.Adam(model.parameters(), lr=3.5e-4, fused=True)  # the fastest CPU kernel
    images = torch.randn(BATCH, 3, *SIZE)
    targets = torch.randint(0, 100, (BATCH,))
    times, cpus, first = [], [], None
    for _ in range(args.warmup + args.iters):
        t, c = time.perf_counter(), _cpu_seconds_with_children()
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(images), targets).backward()
        opt.step()
        times.append(time.perf_counter() - t)
        cpus.append(_cpu_seconds_with_children() - c)
        if first is None:
            first = time.perf_counter() - T_START
    _report(times, cpus, args.warmup, first)


def _hog(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait(timeout=10)


def run_cell(
    kind: str, depth: str, threads: int, loader: str, spin: str, args, data_root: str, out: str
) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), FASTREID_DATASETS=data_root, PYTHONPATH=ROOT)
    for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME", "FASTREID_OMP_WAIT_SET"):
        env.pop(name, None)
    if spin:  # a GOMP_SPINCOUNT value instead of the thread decision (300000: libgomp's default)
        env["GOMP_SPINCOUNT"] = spin
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--child",
        kind,
        "--depth",
        depth,
        "--loader",
        loader,
        "--warmup",
        str(args.warmup),
        "--iters",
        str(args.iters),
        "--output-dir",
        out,
    ]
    if kind == "upstream":
        cmd += ["--upstream", os.path.abspath(args.upstream)]
        if args.upstream_deps:
            cmd += ["--upstream-deps", args.upstream_deps]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"{kind} {depth} {loader} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--spin", action="store_true", help="also run with libgomp's default spinning")
    parser.add_argument(
        "--spincounts",
        help="comma-separated GOMP_SPINCOUNT values to run besides the thread decision (libgomp: ~100000 "
        "spins per ms; 300000 is its default when no wait policy is set)",
    )
    parser.add_argument("--repeats", type=int, default=2, help="interleaved repetitions of the whole matrix")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--hog", type=int, default=2, help="busy-loop processes in the 'hog' condition")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--conditions", default="quiet,hog", help="machine conditions to run: quiet, hog")
    parser.add_argument("--loaders", help=f"comma-separated subset of: {', '.join(LOADERS)}")
    parser.add_argument("--depths", help="comma-separated subset of: 18x, 50x")
    parser.add_argument("--threads", help="comma-separated torch thread counts (default 1,2)")
    parser.add_argument(
        "--upstream",
        help="a checkout of upstream FastReID: adds its trainer's cells (0 workers, 2 workers) for start-up "
        "and step time side by side",
    )
    parser.add_argument(
        "--upstream-deps", help="extra import path(s) upstream needs and this venv lacks (e.g. scikit-learn)"
    )
    parser.add_argument("--child", choices=["trainer", "floor", "upstream"], help=argparse.SUPPRESS)
    parser.add_argument("--depth", default="18x", help=argparse.SUPPRESS)
    parser.add_argument("--loader", default="0 workers", help=argparse.SUPPRESS)
    parser.add_argument("--output-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "trainer":
        return child_trainer(args)
    if args.child == "floor":
        return child_floor(args)
    if args.child == "upstream":
        return child_upstream(args)

    if args.quick:
        depths, threads_list, loaders, args.iters, args.repeats = (
            ["18x"],
            [2],
            ["0 workers", "2 threads"],
            10,
            1,
        )
    else:
        depths, threads_list, loaders = ["18x", "50x"], [1, 2], list(LOADERS)
    if args.loaders:
        loaders = [ld.strip() for ld in args.loaders.split(",")]
    if args.depths:
        depths = [d.strip() for d in args.depths.split(",")]
    if args.threads:
        threads_list = [int(t) for t in args.threads.split(",")]
    hog_conditions = [c.strip() == "hog" for c in args.conditions.split(",")]
    spins = [""] + (["300000"] if args.spin else [])
    if args.spincounts:
        spins += [c.strip() for c in args.spincounts.split(",") if c.strip() not in spins]
    from fastreid.data.synthetic.persons import SyntheticSpec, generate_market1501

    with tempfile.TemporaryDirectory(prefix="fastreid_bench_") as tmp:
        generate_market1501(
            tmp, SyntheticSpec(num_train_ids=60, num_test_ids=10, min_images=8, max_images=12)
        )
        cells = [
            (kind, d, t, ld, spin, hog)
            for hog in hog_conditions
            for d in depths
            for t in threads_list
            for spin in spins
            for kind, ld in _kinds(loaders, args.upstream)
        ]
        results: dict = {}
        print(
            f"{len(cells)} cells x {args.repeats} repetitions; {args.iters} timed iterations after "
            f"{args.warmup} warm-up; batch {BATCH} at {SIZE[0]}x{SIZE[1]}; {os.cpu_count()} cores",
            flush=True,
        )
        for rep in range(args.repeats):
            for hog in hog_conditions:
                hogs = _hog(args.hog) if hog else []
                try:
                    for cell in [c for c in cells if c[5] == hog]:
                        kind, d, t, ld, spin, _ = cell
                        load = os.getloadavg()[0]
                        r = run_cell(kind, d, t, ld, spin, args, tmp, os.path.join(tmp, "out"))
                        r["load"] = load
                        results.setdefault(cell, []).append(r)
                        print(
                            f"  rep {rep} {'hog ' if hog else 'quiet'} R{d[:-1]:<3} {t} thr "
                            f"{'spin ' + spin + ' ' if spin else ''}{kind:<8}{ld:<10} {r['median_s']:.3f} s/iter, "
                            f"{r['median_cpu_s']:.3f} CPU-s/iter, first iteration at {r['first_iter_s']:.1f} s, "
                            f"load {load:.2f}",
                            flush=True,
                        )
                finally:
                    _stop(hogs)
        _summary(results, depths, threads_list, _kinds(loaders, args.upstream), spins, hog_conditions)


def _label(kind: str, loading: str) -> str:
    return {"floor": "floor", "trainer": f"trainer, {loading}", "upstream": f"upstream trainer, {loading}"}[
        kind
    ]


def _kinds(loaders: list[str], upstream: str | None) -> list[tuple[str, str]]:
    """(child kind, loading) of one row group: the floor, our trainer, upstream's (no thread workers)."""
    kinds = [("floor", "-")] + [("trainer", ld) for ld in loaders]
    return kinds + [("upstream", ld) for ld in loaders if upstream and LOADERS[ld][1] == 0]


def _summary(results: dict, depths, threads_list, kinds, spins, hog_conditions) -> None:
    def med(cell, key):
        return statistics.median(r[key] for r in results[cell])

    print(
        "\n| machine | model | threads | waiting | loading | s/iter | it/s | CPU-s/iter | x floor | "
        "first iteration (s) | load avg |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for hog in hog_conditions:
        for d in depths:
            for t in threads_list:
                for spin in spins:
                    floor = med(("floor", d, t, "-", spin, hog), "median_s")
                    for kind, ld in kinds:
                        cell = (kind, d, t, ld, spin, hog)
                        s = med(cell, "median_s")
                        print(
                            f"| {'hog' if hog else 'quiet'} | R{d[:-1]} | {t} | "
                            f"{'GOMP_SPINCOUNT=' + spin if spin else 'fastreid'} | {_label(kind, ld)} | "
                            f"{s:.3f} | {1 / s:.2f} | {med(cell, 'median_cpu_s'):.3f} | {s / floor:.2f} | "
                            f"{med(cell, 'first_iter_s'):.1f} | {med(cell, 'load'):.2f} |"
                        )


if __name__ == "__main__":
    main()
