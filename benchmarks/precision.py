"""Precision and the eager inference path on the CPU, measured side by side.

``--part forward``: images/s of one model's forward pass (eval, no grad, a 32 x 3 x 256 x 128 batch)
along each path a PyTorch user can take, interleaved round by round in one process (median of
``--rounds``), with the ratio to fp32 eager, each path's preparation time and the smallest cosine
(float64) of its features to fp32 eager's:

- fp32 eager: the model as built;
- fp32 channels_last: the same in channels-last memory;
- fp32 BN folded + channels_last: ``fastreid.modeling.compile.optimize_for_inference`` (a copy with
  every BatchNorm after a convolution folded into it);
- TorchScript frozen: ``torch.jit.trace`` + ``torch.jit.freeze`` + ``torch.jit.optimize_for_inference``;
- torch.compile (inductor, with ``--compile``): compile time printed; ``freezing`` folds weights;
- bf16 autocast + channels_last, with and without BN folding (where bfloat16 is native, or always
  with ``--force-bf16``);
- ONNX Runtime fp32 (when onnxruntime is installed): the reference the eager path is compared with.

``--part train``: the synthetic Market-1501 demo (``configs/Demo/bagtricks_demo.yml``, ResNet-18 at
96x48) trained with ``MODEL.PRECISION fp32`` and ``bf16`` for each of ``--seeds``, each run in a
fresh child process, Rank-1/mAP printed side by side (mean and spread); then the fp32-trained
weights of each seed evaluated with fp32 and with bf16 features.

    python benchmarks/precision.py --part forward --depths 18x,50x --rounds 10
    python benchmarks/precision.py --part train --seeds 1,2,3
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402  (after the checkout is on sys.path, like the other benchmarks)
from torch import nn  # noqa: E402

Runner = Callable[[torch.Tensor], torch.Tensor]


def load_average() -> str:
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "n/a"


def cpu_flags_line() -> str:
    from fastreid.utils.precision import cpu_facts, describe_cpu

    facts = cpu_facts()
    flags = set()
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    shown = [
        f for f in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "avx512_fp16") if f in flags
    ]
    return (
        f"CPU flags: {' '.join(shown) or 'n/a'}; bf16 {describe_cpu()}; oneDNN bf16 check {facts.onednn_bf16}; "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads"
    )


# ------------------------------------------------------------------------------------ forward
def build_eval_model(depth: str) -> nn.Module:
    from fastreid.config import get_cfg
    from fastreid.modeling import build_model

    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(ROOT, "configs", "Market1501", "bagtricks_R50.yml"))
    cfg.merge_from_list(
        [
            "MODEL.BACKBONE.PRETRAIN",
            "False",
            "MODEL.BACKBONE.DEPTH",
            depth,
            "MODEL.BACKBONE.FEAT_DIM",
            "2048" if depth in ("50x", "101x", "152x") else "512",
            "MODEL.HEADS.NUM_CLASSES",
            "751",
            "MODEL.DEVICE",
            "cpu",
        ]
    )
    torch.manual_seed(0)
    model = build_model(cfg, log_summary=False).eval()
    # trained-looking BatchNorm statistics, so that folding them is not the identity
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.running_mean is not None:
            m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
    return model


def with_autocast(module: Callable, dtype: torch.dtype) -> Runner:
    def run(images: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=dtype):
            return module(images).float()

    return run


def forward_paths(model: nn.Module, example: torch.Tensor, *, compile_: bool, bf16: bool) -> dict:
    """``{name: (setup seconds, runner or None, note)}`` for every path."""
    from fastreid.inference.export import ExportableModel
    from fastreid.modeling.compile import optimize_for_inference
    from fastreid.utils.precision import decide

    paths: dict[str, tuple[float, Runner | None, str]] = {}

    def add(name: str, make: Callable[[], Runner]) -> None:
        start = time.perf_counter()
        try:
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                runner = make()
                runner(example[:2])  # first call: tracing, compilation, weight packing
            paths[name] = (time.perf_counter() - start, runner, "")
        except Exception as e:  # a path that fails here is reported, not fatal
            paths[name] = (time.perf_counter() - start, None, f"failed: {type(e).__name__}: {e}"[:160])

    fp32 = decide("fp32", "cpu")
    add("fp32 eager", lambda: ExportableModel(model))
    add(
        "fp32 channels_last",
        lambda: ExportableModel(copy.deepcopy(model).to(memory_format=torch.channels_last)),
    )
    add(
        "fp32 BN folded + channels_last",
        lambda: ExportableModel(optimize_for_inference(model, fp32, channels_last=True)),
    )

    def torchscript() -> Runner:
        traced = torch.jit.trace(ExportableModel(copy.deepcopy(model)), example[:2], check_trace=False)
        return torch.jit.optimize_for_inference(torch.jit.freeze(traced.eval()))

    add("TorchScript frozen + optimize_for_inference", torchscript)
    if compile_:
        import torch._inductor.config as inductor_config

        def compiled(freezing: bool) -> Callable[[], Runner]:
            def make() -> Runner:
                inductor_config.freezing = freezing
                return torch.compile(ExportableModel(copy.deepcopy(model)), backend="inductor")

            return make

        torch._dynamo.reset()
        add("torch.compile (inductor)", compiled(False))
        torch._dynamo.reset()
        add("torch.compile (inductor, freezing)", compiled(True))
        inductor_config.freezing = False
    if bf16:

        def torchscript_bf16() -> Runner:
            wrapped = ExportableModel(optimize_for_inference(model, fp32, channels_last=True))
            with torch.autocast("cpu", dtype=torch.bfloat16):
                traced = torch.jit.trace(wrapped, example[:2], check_trace=False)
            frozen = torch.jit.optimize_for_inference(torch.jit.freeze(traced.eval()))
            return lambda images: frozen(images).float()

        add("TorchScript frozen, traced under bf16 autocast", torchscript_bf16)
        if compile_:

            def compiled_bf16() -> Runner:
                torch._dynamo.reset()
                inductor_config.freezing = True
                return with_autocast(
                    torch.compile(ExportableModel(copy.deepcopy(model)), backend="inductor"), torch.bfloat16
                )

            add("torch.compile (inductor, freezing) under bf16 autocast", compiled_bf16)
            inductor_config.freezing = False
        add(
            "bf16 autocast + channels_last",
            lambda: with_autocast(
                ExportableModel(copy.deepcopy(model).to(memory_format=torch.channels_last)), torch.bfloat16
            ),
        )
        add(
            "bf16 + BN folded + channels_last",
            lambda: with_autocast(
                ExportableModel(optimize_for_inference(model, fp32, channels_last=True)), torch.bfloat16
            ),
        )
    try:
        import numpy as np
        import onnxruntime as ort

        from fastreid.inference.export import export_onnx

        def onnx_runtime() -> Runner:
            path = os.path.join(tempfile.mkdtemp(prefix="fastreid-bench-"), "model.onnx")
            export_onnx(model, example[:2], path, dynamic_batch=True)
            options = ort.SessionOptions()
            options.intra_op_num_threads = torch.get_num_threads()
            session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
            name = session.get_inputs()[0].name

            def run(images: torch.Tensor) -> torch.Tensor:
                return torch.from_numpy(session.run(None, {name: np.ascontiguousarray(images.numpy())})[0])

            return run

        add("ONNX Runtime fp32", onnx_runtime)
    except ImportError:
        pass
    return paths


def timed_rounds(runners: dict[str, Callable[[], object]], rounds: int) -> dict[str, tuple[float, float]]:
    """``{name: (median wall seconds, median CPU seconds)}`` of each runner, called in turn
    ``rounds`` times (interleaved, so that every runner sees the same load)."""
    wall: dict[str, list[float]] = {name: [] for name in runners}
    cpu: dict[str, list[float]] = {name: [] for name in runners}
    for _ in range(rounds):
        for name, run in runners.items():
            w, c = time.perf_counter(), time.process_time()
            run()
            cpu[name].append(time.process_time() - c)
            wall[name].append(time.perf_counter() - w)
    return {name: (statistics.median(wall[name]), statistics.median(cpu[name])) for name in runners}


def bench_forward(depth: str, batch: int, rounds: int, compile_: bool, bf16: bool) -> list[dict]:
    model = build_eval_model(depth)
    g = torch.Generator().manual_seed(2)
    images = torch.randint(0, 256, (batch, 3, 256, 128), generator=g).float()
    paths = forward_paths(model, images, compile_=compile_, bf16=bf16)
    live = {name: run for name, (_, run, _) in paths.items() if run is not None}
    with torch.no_grad():
        outputs = {name: run(images).double() for name, run in live.items()}  # warm-up, measured batch size
        times = timed_rounds({name: (lambda run=run: run(images)) for name, run in live.items()}, rounds)
    reference = outputs["fp32 eager"]
    base_wall, base_cpu = times["fp32 eager"]
    rows = []
    for name, (setup, run, note) in paths.items():
        row: dict = {"model": f"R{depth.rstrip('x')}", "path": name, "setup_s": setup, "note": note}
        if run is not None:
            wall, cpu = times[name]
            cos = torch.nn.functional.cosine_similarity(outputs[name], reference, dim=1)
            row.update(
                images_per_s=batch / wall,
                ratio=base_wall / wall,
                cpu_s=cpu,
                cpu_ratio=base_cpu / cpu,
                min_cos=float(cos.min()),
            )
        rows.append(row)
    return rows


def print_forward(rows: list[dict]) -> None:
    print(
        "| model | path | images/s | vs fp32 eager | CPU-s / batch | vs fp32 eager (CPU) | setup s | min cosine |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "ratio" in r:
            print(
                f"| {r['model']} | {r['path']} | {r['images_per_s']:.1f} | {r['ratio']:.2f}x | {r['cpu_s']:.2f} | "
                f"{r['cpu_ratio']:.2f}x | {r['setup_s']:.1f} | {r['min_cos']:.6f} |"
            )
        else:
            print(f"| {r['model']} | {r['path']} | | | | | {r['setup_s']:.1f} | {r['note']} |")


# ---------------------------------------------------------------------------------- train step
def build_train_model(depth: str) -> tuple[nn.Module, object]:
    from fastreid.config import get_cfg
    from fastreid.modeling import build_model
    from fastreid.solver import build_optimizer

    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(ROOT, "configs", "Market1501", "bagtricks_R50.yml"))
    cfg.merge_from_list(
        [
            "MODEL.BACKBONE.PRETRAIN",
            "False",
            "MODEL.BACKBONE.DEPTH",
            depth,
            "MODEL.BACKBONE.FEAT_DIM",
            "2048" if depth in ("50x", "101x", "152x") else "512",
            "MODEL.HEADS.NUM_CLASSES",
            "751",
            "MODEL.DEVICE",
            "cpu",
        ]
    )
    torch.manual_seed(0)
    model = build_model(cfg, log_summary=False).train()
    optimizer, _ = build_optimizer(cfg, model)
    return model, optimizer


def bench_step(
    depth: str, batch: int, rounds: int, bf16: bool, size: tuple[int, int] = (256, 128)
) -> list[dict]:
    """One training step (forward, losses, backward, fused Adam step) of bagtricks at 256x128 along
    fp32 / fp32 channels_last / bf16 autocast + channels_last, interleaved."""
    g = torch.Generator().manual_seed(3)
    batch_dict = {
        "images": torch.randint(0, 256, (batch, 3, *size), generator=g).float(),
        "targets": torch.arange(batch // 4).repeat_interleave(4),
        "camids": torch.zeros(batch, dtype=torch.long),
    }
    variants = {"fp32": (False, None), "fp32 channels_last": (True, None)}
    if bf16:
        variants["bf16 autocast + channels_last"] = (True, torch.bfloat16)
        variants["bf16 autocast, NCHW"] = (False, torch.bfloat16)
    runners = {}
    for name, (channels_last, dtype) in variants.items():
        model, optimizer = build_train_model(depth)
        if channels_last:
            model.to(memory_format=torch.channels_last)

        def step(model: nn.Module = model, optimizer=optimizer, dtype=dtype) -> None:
            with torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
                losses = model(batch_dict)
            loss = sum(losses.values())
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()

        step()  # warm-up: optimizer state, first-call costs
        runners[name] = step
    times = timed_rounds(runners, rounds)
    base_wall, base_cpu = times["fp32"]
    return [
        {
            "model": f"R{depth.rstrip('x')} {size[0]}x{size[1]}",
            "path": name,
            "s_per_step": wall,
            "ratio": base_wall / wall,
            "cpu_s": cpu,
            "cpu_ratio": base_cpu / cpu,
        }
        for name, (wall, cpu) in times.items()
    ]


def print_step(rows: list[dict]) -> None:
    print("| model | training step | s / step | vs fp32 | CPU-s / step | vs fp32 (CPU) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['model']} | {r['path']} | {r['s_per_step']:.2f} | {r['ratio']:.2f}x | {r['cpu_s']:.2f} | "
            f"{r['cpu_ratio']:.2f}x |"
        )


# ------------------------------------------------------------------------------- demo training
def train_child(precision: str, seed: int, root: str, out: str, epochs: int) -> dict:
    """One demo run in this process: train with ``precision``, then evaluate the final weights with
    fp32 and bf16 features. Returns the figures as a dict."""
    from fastreid.config import get_cfg
    from fastreid.engine import DefaultTrainer, default_setup
    from fastreid.utils.env import setup_environment

    setup_environment()
    os.environ["FASTREID_DATASETS"] = root
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(ROOT, "configs", "Demo", "bagtricks_demo.yml"))
    cfg.merge_from_list(
        ["MODEL.PRECISION", precision, "SEED", seed, "OUTPUT_DIR", out, "TEST.REPORT", False]
        + (["SOLVER.MAX_EPOCH", epochs, "SOLVER.STEPS", [max(1, epochs * 7 // 10)]] if epochs else [])
    )
    default_setup(cfg, argparse.Namespace(config_file="", eval_only=False))
    cfg.freeze()
    trainer = DefaultTrainer(cfg)
    trainer.resume_or_load(resume=False)
    wall, cpu = time.perf_counter(), time.process_time()
    trained = trainer.train() or {}
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    figures = {
        "precision": precision,
        "seed": seed,
        "iterations": trainer.max_iter,
        "train_s": wall,
        "train_cpu_s": cpu,
        "Rank-1": float(trained["Rank-1"]),
        "mAP": float(trained["mAP"]),
    }
    for evaluation in ("fp32", "bf16"):
        eval_cfg = cfg.clone()
        eval_cfg.defrost()
        eval_cfg.MODEL.PRECISION = evaluation
        eval_cfg.freeze()
        start = time.perf_counter()
        results = DefaultTrainer.test(eval_cfg, trainer.model)
        figures[f"eval_{evaluation}"] = {
            "Rank-1": float(results["Rank-1"]),
            "mAP": float(results["mAP"]),
            "s": time.perf_counter() - start,
        }
    return figures


def bench_train(seeds: list[int], root: str, epochs: int, precisions: list[str]) -> list[dict]:
    from fastreid.data.synthetic.persons import FOLDER, SyntheticSpec, generate_market1501

    if not os.path.isdir(os.path.join(root, FOLDER, "bounding_box_train")):
        generate_market1501(root, SyntheticSpec())
    rows = []
    for seed in seeds:
        for precision in precisions:  # interleaved: fp32 and bf16 runs of a seed see similar load
            out = tempfile.mkdtemp(prefix=f"fastreid-demo-{precision}-{seed}-")
            result_file = os.path.join(out, "figures.json")
            command = [
                sys.executable,
                os.path.abspath(__file__),
                "--child-train",
                "--precision",
                precision,
                "--seed",
                str(seed),
                "--root",
                root,
                "--out",
                out,
                "--epochs",
                str(epochs),
                "--json",
                result_file,
            ]
            done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if done.returncode:
                raise SystemExit(f"demo run failed ({' '.join(command)}):\n{done.stderr[-4000:]}")
            with open(result_file, encoding="utf-8") as f:
                rows.append(json.load(f))
            r = rows[-1]
            print(
                f"seed {seed} {precision}: Rank-1 {r['Rank-1']:.1f} mAP {r['mAP']:.1f} in {r['train_s']:.0f} s "
                f"({r['train_cpu_s']:.0f} CPU-s); load {load_average()}",
                flush=True,
            )
    return rows


def _mean_spread(values: list[float]) -> str:
    mean = statistics.mean(values)
    spread = (max(values) - min(values)) / 2
    return f"{mean:.1f} ± {spread:.1f}"


def print_train(rows: list[dict]) -> None:
    print("| trained in | seeds | Rank-1 | mAP | training s | training CPU-s |")
    print("|---|---|---|---|---|---|")
    for precision in dict.fromkeys(r["precision"] for r in rows):
        rs = [r for r in rows if r["precision"] == precision]
        print(
            f"| {precision} | {', '.join(str(r['seed']) for r in rs)} | {_mean_spread([r['Rank-1'] for r in rs])} | "
            f"{_mean_spread([r['mAP'] for r in rs])} | {statistics.mean(r['train_s'] for r in rs):.0f} | "
            f"{statistics.mean(r['train_cpu_s'] for r in rs):.0f} |"
        )
    print()
    print(
        "| trained in | seed | fp32 eval Rank-1 | bf16 eval Rank-1 | fp32 eval mAP | bf16 eval mAP | eval s fp32 / bf16 |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        a, b = r["eval_fp32"], r["eval_bf16"]
        print(
            f"| {r['precision']} | {r['seed']} | {a['Rank-1']:.2f} | {b['Rank-1']:.2f} | {a['mAP']:.2f} | "
            f"{b['mAP']:.2f} | {a['s']:.1f} / {b['s']:.1f} |"
        )
    worst = max(max(abs(r["eval_fp32"][k] - r["eval_bf16"][k]) for k in ("Rank-1", "mAP")) for r in rows)
    print(f"largest fp32/bf16 evaluation difference on the same weights: {worst:.2f} points")


# --------------------------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", default="forward", choices=["forward", "step", "train"])
    parser.add_argument("--depths", default="18x,50x")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--size", default="256x128", help="--part step: input height x width")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--compile", action="store_true", help="include torch.compile (slow to compile)")
    parser.add_argument("--force-bf16", action="store_true", help="bf16 rows where it is not native too")
    parser.add_argument("--json", default="", help="also write the rows to this file")
    parser.add_argument("--seeds", default="1,2,3", help="--part train: seeds of the demo runs")
    parser.add_argument(
        "--epochs", type=int, default=0, help="--part train: SOLVER.MAX_EPOCH (0: the demo's)"
    )
    parser.add_argument("--root", default="", help="--part train: datasets folder (default: a temporary one)")
    parser.add_argument("--child-train", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--precision", default="fp32", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--out", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_train:
        figures = train_child(args.precision, args.seed, args.root, args.out, args.epochs)
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(figures, f)
        return

    from fastreid.utils.precision import native_bf16

    print(cpu_flags_line())
    print(f"load average before: {load_average()}", flush=True)
    rows: list[dict] = []
    if args.part == "forward":
        bf16 = native_bf16()[0] or args.force_bf16
        if args.compile:  # compile times from an empty cache, not from an earlier run's
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="fastreid-inductor-")
        for depth in args.depths.split(","):
            rows += bench_forward(depth, args.batch, args.rounds, args.compile, bf16)
        print_forward(rows)
    elif args.part == "step":
        bf16 = native_bf16()[0] or args.force_bf16
        height, width = (int(v) for v in args.size.split("x"))
        size = (height, width)
        for depth in args.depths.split(","):
            rows += bench_step(depth, args.batch, args.rounds, bf16, size)
        print_step(rows)
    elif args.part == "train":
        from fastreid.utils.precision import PrecisionError, decide

        try:
            decide("bf16", "cpu")
        except PrecisionError as e:
            raise SystemExit(f"--part train compares fp32 with bf16 training: {e}") from None
        root = args.root or tempfile.mkdtemp(prefix="fastreid-demo-data-")
        rows = bench_train([int(x) for x in args.seeds.split(",")], root, args.epochs, ["fp32", "bf16"])
        print_train(rows)
    print(f"load average after: {load_average()}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
