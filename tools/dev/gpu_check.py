#!/usr/bin/env python
"""``make gpu-check``: every CUDA path of the package run on one CUDA GPU, offline, in minutes.

One row per check, PASS / FAIL / SKIP with the figure and the reason, printed as a table and
written to ``<out>/gpu_check.json`` (and ``gpu_check.md``, the same table in Markdown):

- 1     ``DataLoaderX``'s CUDA stream prefetch gives the plain loader's batches bit for bit; the
        data-wait share of a training step with and without it
- 2     pinned memory and non-blocking copies exactly when the model is on CUDA
- ref   the CPU reference: the demo (``configs/Demo``, synthetic Market-1501) trained on the CPU
        beside the first checks (or read from ``--cpu-reference``, the JSON of an earlier run)
- 3a/3b the demo on the GPU in float32 and with ``SOLVER.AMP.ENABLED`` (float16 + GradScaler):
        losses finite, Rank-1 within 2 points of the CPU reference's, wall time
- 4     the demo under bfloat16 autocast (``MODEL.PRECISION bf16``), the same checks
- 5a/5b ``torchrun --nproc_per_node 1 ... --dist-url env://`` (an nccl process group) and
        ``--num-gpus 1``: each trains and resumes
- 6     evaluation of features on the GPU equals the same features' on the CPU (1e-6), re-ranking
        included; GPU- and CPU-computed features' metrics side by side
- 7     ONNX and TorchScript export from a model on CUDA, checked against eager
- 8a/8b ``fastreid-extract --device cuda`` and ``fastreid-serve --device cuda`` answer like the CPU
- 9     training throughput of bagtricks R50 at 256x128, batch 64, float32 and AMP (images/s, peak
        GPU memory); with ``--upstream DIR`` upstream FastReID's own trainer beside it
- 10    a batch too large for the GPU: one-line error naming SOLVER.IMS_PER_BATCH and the memory
        asked for, no traceback, the last checkpoint intact

Without CUDA every CUDA check is SKIP (with the reason) and the script still exits 0: it then
runs the CPU reference, whose JSON a GPU machine can take with ``--cpu-reference``. The exit
status is 1 when a check FAILs.

    python tools/dev/gpu_check.py [--out logs/gpu_check] [--cpu-reference FILE] [--upstream DIR]
                                  [--only 1,2,3a] [--budget-s 480]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import hashlib
import json
import math
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import traceback
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any, Optional

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"
DEMO_CONFIG = os.path.join(REPO, "configs", "Demo", "bagtricks_demo.yml")
R50_CONFIG = "configs/Market1501/bagtricks_R50.yml"  # relative: ours and upstream's checkout have it
RANK1_TOLERANCE = 2.0  # points: a GPU demo's Rank-1 against the CPU reference's
EVAL_TOLERANCE = 1e-6  # the same features evaluated from the GPU and from the CPU
NO_CUDA = "no CUDA device (torch.cuda.is_available() is False)"


class CannotRunError(Exception):
    """The check cannot run here; the message says why."""


class CheckFailedError(Exception):
    """The check ran and found a fault; ``figure`` holds what was measured."""

    def __init__(self, reason: str, figure: str = "") -> None:
        super().__init__(reason)
        self.figure = figure


@dataclasses.dataclass
class Row:
    id: str
    name: str
    status: str
    figure: str = ""
    reason: str = ""
    seconds: float = 0.0
    data: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Check:
    id: str
    name: str
    cuda: bool
    run: Callable[[Context], tuple[str, dict]]  # -> (figure, data); raises CannotRunError / CheckFailedError


class Context:
    """What the checks share: options, folders, the data set, the runs the later checks reuse."""

    def __init__(self, args: argparse.Namespace) -> None:
        import torch

        self.args = args
        self.out = os.path.abspath(args.out)
        self.root = os.path.abspath(args.root or os.path.join(self.out, "datasets"))
        self.cuda = torch.cuda.is_available()
        self.runs: dict[str, str] = {}  # check id -> OUTPUT_DIR of its run
        self.reference: Optional[dict] = None  # the CPU reference's figures
        self.reference_run: Optional[Process] = None  # its training, when it runs here
        self.started = time.monotonic()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [REPO, env.get("PYTHONPATH")]))
        env["FASTREID_DATASETS"] = self.root
        env["PYTHONUNBUFFERED"] = "1"
        self.env = env

    def left_s(self) -> float:
        return self.args.budget_s - (time.monotonic() - self.started)

    def demo_opts(self, device: str, epochs: Optional[int] = None) -> list[str]:
        opts = ["MODEL.DEVICE", device, "SOLVER.MAX_EPOCH", str(epochs or self.args.epochs)]
        if device == "cuda":
            opts += ["DATALOADER.NUM_WORKERS", str(self.args.workers)]  # same batches: seeded per sample
        return opts + list(self.args.demo_opts)


# ----------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------
class Process:
    """A real process (as a user runs it), its output in ``<out>/logs/<name>.log``, killed with
    everything it started when it outlives ``timeout`` (exit -9)."""

    def __init__(self, ctx: Context, name: str, cmd: list[str], timeout: float) -> None:
        os.makedirs(os.path.join(ctx.out, "logs"), exist_ok=True)
        self.log_path = os.path.join(ctx.out, "logs", f"{name}.log")
        self.timeout = max(10.0, min(timeout, ctx.left_s() + 30))
        self.start = time.perf_counter()
        with open(self.log_path, "w", encoding="utf-8") as log:
            log.write("$ " + " ".join(cmd) + "\n")
            log.flush()
            self.proc = subprocess.Popen(
                cmd, cwd=REPO, env=ctx.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def wait(self) -> tuple[int, str, float]:
        """(exit code, output, wall seconds)."""
        left = self.timeout - (time.perf_counter() - self.start)
        try:
            code = self.proc.wait(timeout=max(1.0, left))
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            code = self.proc.wait()
            with open(self.log_path, "a", encoding="utf-8") as log:
                log.write(f"\n[gpu_check] killed after {self.timeout:.0f} s\n")
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            output = f.read()
        return code, output, time.perf_counter() - self.start


def run_logged(ctx: Context, name: str, cmd: list[str], timeout: float) -> tuple[int, str, float]:
    """Run ``cmd`` to its end (see :class:`Process`): (exit code, output, wall seconds)."""
    return Process(ctx, name, cmd, timeout).wait()


def tail(text: str, lines: int = 3) -> str:
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])


def train_cmd(config: str, output: str, opts: list[str], *extra: str) -> list[str]:
    return [
        sys.executable,
        os.path.join(REPO, "tools", "train_net.py"),
        "--config-file",
        config,
        *extra,
        *opts,
        "OUTPUT_DIR",
        output,
    ]


def read_results(output_dir: str) -> dict:
    """The last evaluation's metrics of a run (``evaluation_results.json``)."""
    path = os.path.join(output_dir, "evaluation_results.json")
    if not os.path.exists(path):
        raise CheckFailedError(f"no {path}: the run did not evaluate")
    with open(path, encoding="utf-8") as f:
        results = json.load(f)
    while isinstance(results, dict) and "Rank-1" not in results and len(results) == 1:
        results = next(iter(results.values()))  # {"Market1501": {...}} or similar nesting
    if not isinstance(results, dict) or "Rank-1" not in results:
        raise CheckFailedError(f"{path} holds no Rank-1: {str(results)[:200]}")
    return results


def losses_of(output_dir: str) -> list[float]:
    """Every ``total_loss`` the run logged (``metrics.json``, one JSON object per line)."""
    values = []
    with open(os.path.join(output_dir, "metrics.json"), encoding="utf-8") as f:
        for line in f:
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if "total_loss" in record:
                    values.append(float(record["total_loss"]))
    return values


def sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def demo_cfg(ctx: Context, device: str, *opts: Any):
    from fastreid.config import get_cfg

    cfg = get_cfg()
    cfg.merge_from_file(DEMO_CONFIG)
    cfg.merge_from_list([*ctx.demo_opts(device), "OUTPUT_DIR", os.path.join(ctx.out, "scratch"), *opts])
    return cfg


def shutdown(loader: Any) -> None:
    stop = getattr(loader, "shutdown", None)
    if callable(stop):
        stop()


def trained_model(ctx: Context, device: str):
    """(cfg, model in eval mode on ``device``) of the float32 GPU demo run (check 3a) or, without
    one, the CPU reference run."""
    from fastreid.config import get_cfg
    from fastreid.modeling import build_model
    from fastreid.utils.checkpoint import Checkpointer

    run = ctx.runs.get("3a") or ctx.runs.get("ref")
    if run is None or not os.path.exists(os.path.join(run, "model_final.pth")):
        raise CannotRunError("needs the trained demo of check 3a (or the CPU reference run)")
    cfg = get_cfg()
    cfg.merge_from_file(os.path.join(run, "config.yaml"))
    cfg.merge_from_list(["MODEL.DEVICE", device, "MODEL.BACKBONE.PRETRAIN", False])
    model = build_model(cfg, log_summary=False)
    Checkpointer(model).load(os.path.join(run, "model_final.pth"))
    return cfg, model.eval()


@contextlib.contextmanager
def no_tf32() -> Iterator[None]:
    """Full float32 matrix products and convolutions on the GPU (no TF32) while active."""
    import torch

    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


# ----------------------------------------------------------------------------------------------
# the checks
# ----------------------------------------------------------------------------------------------
def check_reference(ctx: Context) -> tuple[str, dict]:
    """The CPU demo: read from ``--cpu-reference``, or trained here (started at the beginning of
    the run, beside the GPU checks: see :func:`start_reference`)."""
    if ctx.args.cpu_reference:
        with open(ctx.args.cpu_reference, encoding="utf-8") as f:
            saved = json.load(f)
        ref = next(
            (r for r in saved.get("rows", []) if r.get("id") == "ref" and r.get("status") == PASS), None
        )
        if ref is None:
            raise CheckFailedError(f"{ctx.args.cpu_reference} has no passed CPU reference row")
        if ref["data"].get("epochs") != ctx.args.epochs:
            raise CheckFailedError(
                f"{ctx.args.cpu_reference} trained {ref['data'].get('epochs')} epochs, this run {ctx.args.epochs}"
            )
        ctx.reference = ref["data"]
        where = saved.get("environment", {}).get("cpu", "?")
        return (
            f"Rank-1 {ref['data']['rank1']:.1f}, mAP {ref['data']['mAP']:.1f}, {ref['data']['wall_s']:.0f} s "
            f"(from {os.path.basename(ctx.args.cpu_reference)}, CPU {where})",
            dict(ref["data"], source=os.path.abspath(ctx.args.cpu_reference)),
        )
    if ctx.reference_run is None:
        start_reference(ctx)
    assert ctx.reference_run is not None
    data = finish_demo(ctx, "ref", ctx.reference_run)
    ctx.reference = data
    return f"Rank-1 {data['rank1']:.1f}, mAP {data['mAP']:.1f}, {data['wall_s']:.0f} s", data


def start_reference(ctx: Context) -> None:
    """Start the CPU reference's training now; its row waits for it."""
    ctx.reference_run = start_demo(ctx, "ref", "cpu", ["MODEL.PRECISION", "fp32"])  # bf16-native CPUs too


def start_demo(ctx: Context, check_id: str, device: str, extra_opts: list[str]) -> Process:
    """Start training the demo (a real ``tools/train_net.py`` process)."""
    out = os.path.join(ctx.out, "runs", check_id)
    shutil.rmtree(out, ignore_errors=True)
    ctx.runs[check_id] = out
    cmd = train_cmd(DEMO_CONFIG, out, ctx.demo_opts(device) + extra_opts)
    return Process(ctx, f"train_{check_id}", cmd, timeout=ctx.args.train_timeout_s)


def finish_demo(ctx: Context, check_id: str, process: Process) -> dict:
    """Wait for a demo run; its figures, or CheckFailedError."""
    code, output, wall = process.wait()
    if code != 0:
        raise CheckFailedError(f"training exited {code}: {tail(output)}")
    out = ctx.runs[check_id]
    losses = losses_of(out)
    if not losses or not all(math.isfinite(v) for v in losses):
        raise CheckFailedError(f"{len(losses)} losses logged, not all finite")
    results = read_results(out)
    return {
        "rank1": float(results["Rank-1"]),
        "mAP": float(results["mAP"]),
        "wall_s": round(wall, 1),
        "losses_logged": len(losses),
        "final_loss": losses[-1],
        "epochs": ctx.args.epochs,
    }


def gpu_demo(
    ctx: Context, check_id: str, extra_opts: list[str], autocast_line: Optional[str]
) -> tuple[str, dict]:
    data = finish_demo(ctx, check_id, start_demo(ctx, check_id, "cuda", extra_opts))
    if ctx.reference is None:
        raise CannotRunError("needs the CPU reference (row ref)")
    if autocast_line is not None:
        with open(os.path.join(ctx.runs[check_id], "log.txt"), encoding="utf-8", errors="replace") as f:
            if autocast_line not in f.read():
                raise CheckFailedError(
                    f"the log does not say {autocast_line!r}: the run did not use that precision"
                )
    delta = data["rank1"] - ctx.reference["rank1"]
    figure = (
        f"Rank-1 {data['rank1']:.1f} (CPU {ctx.reference['rank1']:.1f}, {delta:+.1f}), mAP {data['mAP']:.1f}, "
        f"{data['wall_s']:.0f} s (CPU {ctx.reference['wall_s']:.0f} s)"
    )
    if abs(delta) > RANK1_TOLERANCE:
        raise CheckFailedError(
            f"Rank-1 is {abs(delta):.1f} points from the CPU demo's (at most {RANK1_TOLERANCE})", figure
        )
    return figure, data


def check_prefetch(ctx: Context) -> tuple[str, dict]:
    import torch

    from fastreid.data.build import build_reid_train_loader
    from fastreid.modeling import build_model

    batches = ctx.args.loader_batches
    cuda_loader = build_reid_train_loader(demo_cfg(ctx, "cuda"))
    cpu_loader = build_reid_train_loader(demo_cfg(ctx, "cuda", "MODEL.DEVICE", "cpu"))
    try:
        if not cuda_loader.decision.cuda_prefetch:
            raise CheckFailedError("the loader of a CUDA model did not decide on CUDA prefetch")
        for i, (on_gpu, on_cpu) in enumerate(zip(cuda_loader, cpu_loader)):
            for key in ("images", "targets", "camids"):
                a, b = on_gpu[key], on_cpu[key]
                if not a.is_cuda:
                    raise CheckFailedError(f"batch {i}: {key} is on {a.device}, not on the GPU")
                if a.dtype != b.dtype or not torch.equal(a.cpu(), b):
                    raise CheckFailedError(f"batch {i}: {key} differs from the plain loader's")
            if i + 1 == batches:
                break
    finally:
        shutdown(cuda_loader)
        shutdown(cpu_loader)

    # the data-wait share of a training step, with the prefetcher and without (plain loader, the
    # model copies each batch itself)
    cfg = demo_cfg(ctx, "cuda", "MODEL.HEADS.NUM_CLASSES", int(cuda_loader.dataset.num_classes))
    model = build_model(cfg, log_summary=False).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    shares = {}
    for label, device in (("prefetch", "cuda"), ("plain", "cpu")):
        loader = build_reid_train_loader(demo_cfg(ctx, "cuda", "MODEL.DEVICE", device))
        waited = total = 0.0
        try:
            it = iter(loader)
            for step in range(ctx.args.wait_steps + 5):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                batch = next(it)
                t1 = time.perf_counter()
                losses = model(batch)
                optimizer.zero_grad()
                sum(losses.values()).backward()
                optimizer.step()
                torch.cuda.synchronize()
                if step >= 5:  # warm-up: workers start, cuDNN picks its algorithms
                    waited += t1 - t0
                    total += time.perf_counter() - t0
        finally:
            shutdown(loader)
        shares[label] = waited / total
    figure = (
        f"{batches} batches bit-identical; data wait {100 * shares['prefetch']:.0f} % of the step with "
        f"prefetch, {100 * shares['plain']:.0f} % without ({ctx.args.workers} workers, demo R18 96x48)"
    )
    return figure, {"batches": batches, "wait_share": shares}


def check_pinned(ctx: Context) -> tuple[str, dict]:
    """Every host-to-device copy of the CUDA loader's batches is non-blocking from pinned memory;
    the CPU loader makes none and pins nothing."""
    import torch

    from fastreid.data.build import build_reid_train_loader

    original_to = torch.Tensor.to
    copies: list[tuple[bool, bool]] = []  # (non_blocking, source pinned) of each host -> GPU copy

    def recording_to(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        result = original_to(self, *args, **kwargs)
        if result.is_cuda and not self.is_cuda:
            copies.append((bool(kwargs.get("non_blocking", False)), self.is_pinned()))
        return result

    found = {}
    for device in ("cuda", "cpu"):
        loader = build_reid_train_loader(demo_cfg(ctx, "cuda", "MODEL.DEVICE", device))
        copies.clear()
        torch.Tensor.to = recording_to  # type: ignore[method-assign]
        try:
            it = iter(loader)
            next(it)
            batch = next(it)
        finally:
            torch.Tensor.to = original_to  # type: ignore[method-assign]
            shutdown(loader)
        found[device] = {
            "pin_memory": bool(loader.decision.pin_memory),
            "cuda_prefetch": bool(loader.decision.cuda_prefetch),
            "copies": len(copies),
            "non_blocking": sum(nb for nb, _ in copies),
            "from_pinned": sum(p for _, p in copies),
            "batch_on": str(batch["images"].device),
            "batch_pinned": bool(batch["images"].is_pinned()),
        }
    g, c = found["cuda"], found["cpu"]
    figure = (
        f"CUDA model: pin {g['pin_memory']}, {g['copies']} copies, {g['non_blocking']} non-blocking from "
        f"{g['from_pinned']} pinned; CPU model: pin {c['pin_memory']}, {c['copies']} copies"
    )
    faults = []
    if not (g["pin_memory"] and g["cuda_prefetch"]):
        faults.append("the CUDA model's loader does not pin memory and prefetch")
    if g["copies"] == 0 or g["non_blocking"] != g["copies"] or g["from_pinned"] != g["copies"]:
        faults.append("a copy to the GPU was blocking or from pageable memory")
    if not g["batch_on"].startswith("cuda"):
        faults.append(f"the CUDA loader's batch is on {g['batch_on']}")
    if c["pin_memory"] or c["cuda_prefetch"] or c["copies"] or c["batch_pinned"]:
        faults.append("the CPU model's loader pinned memory or copied to the GPU")
    if faults:
        raise CheckFailedError("; ".join(faults), figure)
    return figure, found


def check_torchrun_and_num_gpus(ctx: Context, check_id: str) -> tuple[str, dict]:
    """Train ``LAUNCH_ITERS`` iterations, then ``--resume`` to twice that; both through the launcher
    under test."""
    out = os.path.join(ctx.out, "runs", check_id)
    shutil.rmtree(out, ignore_errors=True)
    base = [*ctx.demo_opts("cuda"), "TEST.EVAL_PERIOD", "0"]
    if check_id == "5a":
        launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "1", "--master_port",
                    str(free_port()), "-m", "fastreid.cli.train"]  # fmt: skip
        extra = ["--dist-url", "env://"]
    else:
        launcher = [sys.executable, os.path.join(REPO, "tools", "train_net.py")]
        extra = ["--num-gpus", "1"]
    figures = {}
    for stage, iters, resume in (("train", LAUNCH_ITERS, []), ("resume", 2 * LAUNCH_ITERS, ["--resume"])):
        opts = [*base, "SOLVER.MAX_ITER", str(iters)]
        cmd = [*launcher, "--config-file", DEMO_CONFIG, *extra, *resume, *opts, "OUTPUT_DIR", out]
        code, output, wall = run_logged(ctx, f"{check_id}_{stage}", cmd, timeout=ctx.args.train_timeout_s)
        if code != 0:
            raise CheckFailedError(f"{stage} exited {code}: {tail(output)}")
        figures[stage] = round(wall, 1)
        if stage == "resume" and f"Resuming after iteration {LAUNCH_ITERS}" not in output:
            raise CheckFailedError(f"--resume did not continue after iteration {LAUNCH_ITERS}")
    with open(os.path.join(out, "log.txt"), encoding="utf-8", errors="replace") as f:
        log = f.read()
    group = re.search(r"World size: (\d+)(?: \(process group: (\w+)\))?", log)
    world = group.group(1) if group else "?"
    backend = (group.group(2) if group else None) or "none"
    if check_id == "5a" and backend != "nccl":
        raise CheckFailedError(f"the torchrun run's process group is {backend}, not nccl")
    losses = losses_of(out)
    if not losses or not all(math.isfinite(v) for v in losses):
        raise CheckFailedError(f"{len(losses)} losses logged, not all finite")
    figure = (
        f"world size {world}, process group {backend}; {LAUNCH_ITERS} iterations in {figures['train']:.0f} s, "
        f"resumed to {2 * LAUNCH_ITERS} in {figures['resume']:.0f} s (process start-up included)"
    )
    return figure, {"backend": backend, "world_size": world, **figures}


#: Iterations of the launcher runs (check 5) and of the run check 10 resumes.
LAUNCH_ITERS = 20


def check_eval(ctx: Context) -> tuple[str, dict]:
    import numpy as np
    import torch

    from fastreid.data.build import build_reid_test_loader
    from fastreid.evaluation import ReidEvaluator

    cfg, model = trained_model(ctx, "cuda")
    loader, num_query = build_reid_test_loader(cfg, dataset_name=cfg.DATASETS.TESTS[0])
    batches, outputs = [], []
    try:
        with torch.no_grad():
            for batch in loader:
                outputs.append(model(batch))
                batches.append({k: batch[k] for k in ("targets", "camids", "img_paths")})
    finally:
        shutdown(loader)
    if not outputs[0].is_cuda:
        raise CheckFailedError(f"the model's features are on {outputs[0].device}, not the GPU")

    def metrics(features: list, rerank: bool, tag: str) -> dict:
        c = cfg.clone()
        c.defrost()
        c.TEST.RERANK.ENABLED = rerank
        evaluator = ReidEvaluator(c, num_query, output_dir=os.path.join(ctx.out, "scratch", tag))
        evaluator.reset()
        for b, f in zip(batches, features):
            evaluator.process(b, f)
        return {k: float(v) for k, v in evaluator.evaluate().items() if np.ndim(v) == 0}

    worst = 0.0
    table = {}
    for rerank in (False, True):
        on_gpu = metrics(outputs, rerank, f"gpu_{rerank}")
        on_cpu = metrics([o.cpu() for o in outputs], rerank, f"cpu_{rerank}")
        worst = max([worst, *(abs(on_gpu[k] - on_cpu[k]) for k in on_cpu)])
        table["rerank" if rerank else "plain"] = on_gpu
    # the same weights' features computed on the CPU: float differences of two devices
    _, cpu_model = trained_model(ctx, "cpu")
    cpu_loader, _ = build_reid_test_loader(cfg, dataset_name=cfg.DATASETS.TESTS[0])
    cpu_outputs = []
    try:
        with torch.no_grad():
            for batch in cpu_loader:
                cpu_outputs.append(cpu_model(batch))
    finally:
        shutdown(cpu_loader)
    cpu_features = metrics(cpu_outputs, False, "cpu_model")
    plain = table["plain"]
    figure = (
        f"GPU vs CPU evaluation of the same features: largest difference {worst:.1e} (plain and "
        f"re-ranked: Rank-1 {plain['Rank-1']:.2f} / {table['rerank']['Rank-1']:.2f}); features from the CPU "
        f"model: Rank-1 {cpu_features['Rank-1']:.2f} ({cpu_features['Rank-1'] - plain['Rank-1']:+.2f}), "
        f"mAP {cpu_features['mAP']:.2f} ({cpu_features['mAP'] - plain['mAP']:+.2f})"
    )
    if worst > EVAL_TOLERANCE:
        raise CheckFailedError(
            f"the same features evaluate differently from the GPU (by {worst:.2e})", figure
        )
    return figure, {"largest_difference": worst, "gpu": table, "cpu_model": cpu_features}


def check_export(ctx: Context) -> tuple[str, dict]:
    import torch

    from fastreid.inference.export import check_export as check_file
    from fastreid.inference.export import export_onnx, export_torchscript, load_exported

    cfg, model = trained_model(ctx, "cuda")
    h, w = cfg.INPUT.SIZE_TEST
    images = torch.rand(8, 3, h, w, generator=torch.Generator().manual_seed(0)) * 255
    folder = os.path.join(ctx.out, "export")
    os.makedirs(folder, exist_ok=True)
    found = {}
    for fmt in ("onnx", "torchscript"):
        try:
            if fmt == "onnx":
                path = export_onnx(
                    model, images[:2].cuda(), os.path.join(folder, "model.onnx"), dynamic_batch=True
                )
            else:
                path = export_torchscript(model, images[:2].cuda(), os.path.join(folder, "model.pt"))
            result = check_file(model, path, fmt, images, batch_sizes=(1, 4))
        except ImportError as e:
            raise CannotRunError(f"{fmt}: {e}") from e
        with torch.no_grad(), no_tf32():  # against the CUDA model itself, in full float32
            eager = model({"images": images.cuda()}).float().cpu().numpy()
        exported = load_exported(path, fmt)(images.numpy())
        scale = max(1.0, float(abs(eager).max()))
        found[fmt] = {
            "vs_cpu_eager": result.scaled_diff,
            "vs_cuda_eager": float(abs(exported - eager).max()) / scale,
        }
        if next(model.parameters()).device.type != "cuda":
            raise CheckFailedError("the export moved the user's model off the GPU")
    figure = "; ".join(
        f"{fmt}: scaled difference {v['vs_cpu_eager']:.1e} (CPU eager), {v['vs_cuda_eager']:.1e} (CUDA eager)"
        for fmt, v in found.items()
    )
    worst = max(v["vs_cuda_eager"] for v in found.values())
    if worst > 1e-3:
        raise CheckFailedError(f"an export differs from the CUDA model by {worst:.1e} (scaled)", figure)
    return figure, found


def check_extract(ctx: Context) -> tuple[str, dict]:
    import numpy as np

    run = ctx.runs.get("3a")
    if run is None:
        raise CannotRunError("needs the trained demo of check 3a")
    query = os.path.join(ctx.root, "Market-1501-v15.09.15", "query")
    feats = {}
    for device in ("cuda", "cpu"):
        out = os.path.join(ctx.out, "extract", device)
        shutil.rmtree(out, ignore_errors=True)
        cmd = [sys.executable, "-m", "fastreid.cli.extract", "--config-file", os.path.join(run, "config.yaml"),
               "--input", query, "--output", out, "--device", device,
               "MODEL.WEIGHTS", os.path.join(run, "model_final.pth")]  # fmt: skip
        code, output, _ = run_logged(ctx, f"extract_{device}", cmd, timeout=180)
        if code != 0:
            raise CheckFailedError(f"fastreid-extract --device {device} exited {code}: {tail(output)}")
        with open(os.path.join(out, "files.txt"), encoding="utf-8") as f:
            files = f.read().split("\n")
        feats[device] = (np.load(os.path.join(out, "features.npy")), files)
    (g, gfiles), (c, cfiles) = feats["cuda"], feats["cpu"]
    if gfiles != cfiles or g.shape != c.shape:
        raise CheckFailedError("the CUDA and CPU extractions hold different files or shapes")
    cos = (g * c).sum(1) / (np.linalg.norm(g, axis=1) * np.linalg.norm(c, axis=1))
    scaled = float(abs(g - c).max() / max(1.0, abs(c).max()))
    figure = (
        f"{len(g)} images: cosine(CUDA, CPU) >= {cos.min():.6f}, largest scaled difference {scaled:.1e} "
        "(cuDNN's TF32 convolutions, PyTorch's CUDA default)"
    )
    if cos.min() < FEATURE_COSINE:
        raise CheckFailedError(
            f"a CUDA feature is further than cosine {FEATURE_COSINE} from the CPU's", figure
        )
    return figure, {"images": len(g), "min_cosine": float(cos.min()), "scaled": scaled}


class Server:
    """A real ``fastreid-serve`` process on 127.0.0.1 (started at once; :meth:`url` waits until it
    answers ``/health``), stopped on exit."""

    def __init__(self, ctx: Context, run: str, gallery: str, device: str) -> None:
        self.device, self.port = device, free_port()
        self.log_path = os.path.join(ctx.out, "logs", f"serve_{device}.log")
        cmd = [sys.executable, "-m", "fastreid.cli.serve", "--model", run, "--gallery", gallery,
               "--device", device, "--port", str(self.port)]  # fmt: skip
        with open(self.log_path, "w", encoding="utf-8") as log:
            self.proc = subprocess.Popen(
                cmd, cwd=REPO, env=ctx.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def url(self, timeout: float = 180) -> str:
        url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                with open(self.log_path, encoding="utf-8", errors="replace") as f:
                    raise CheckFailedError(
                        f"fastreid-serve --device {self.device} exited {self.proc.returncode}: {tail(f.read())}"
                    )
            with contextlib.suppress(OSError), urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    return url
            if time.monotonic() > deadline:
                raise CheckFailedError(
                    f"fastreid-serve --device {self.device} did not answer /health in {timeout} s"
                )
            time.sleep(0.5)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def search(url: str, image_path: str, k: int = 10) -> list[dict]:
    boundary = "gpucheckboundary"
    with open(image_path, "rb") as f:
        image = f.read()
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="image"; filename="q.jpg"\r\n'
            f"Content-Type: image/jpeg\r\n\r\n"
        ).encode()
        + image
        + f"\r\n--{boundary}--\r\n".encode()
    )
    request = urllib.request.Request(
        f"{url}/search?k={k}",
        data=body,
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
    )
    with urllib.request.urlopen(request, timeout=60) as r:
        return json.loads(r.read())["results"]


def check_serve(ctx: Context) -> tuple[str, dict]:
    run = ctx.runs.get("3a")
    if run is None:
        raise CannotRunError("needs the trained demo of check 3a")
    market = os.path.join(ctx.root, "Market-1501-v15.09.15")
    gallery = os.path.join(market, "bounding_box_test")
    queries = sorted(os.listdir(os.path.join(market, "query")))[: ctx.args.serve_queries]
    answers = {}
    with contextlib.ExitStack() as stack:  # both servers start (index their gallery) at once
        servers = [stack.enter_context(Server(ctx, run, gallery, device)) for device in ("cuda", "cpu")]
        for srv in servers:
            url = srv.url()
            answers[srv.device] = [search(url, os.path.join(market, "query", q)) for q in queries]
    n, tol = len(queries), DISTANCE_TOLERANCE
    same_top1 = same_lists = 0
    worst, faults = 0.0, []
    for q, g, c in zip(queries, answers["cuda"], answers["cpu"]):
        cpu_distance = {r["name"]: float(r["distance"]) for r in c}
        # distances rank by rank (a sorted list: swapped near-ties do not count) and name by name
        worst = max([worst, *(abs(float(a["distance"]) - float(b["distance"])) for a, b in zip(g, c))])
        worst = max(
            [
                worst,
                *(
                    abs(float(a["distance"]) - cpu_distance[a["name"]])
                    for a in g
                    if a["name"] in cpu_distance
                ),
            ]
        )
        same_lists += [r["name"] for r in g] == [r["name"] for r in c]
        if g[0]["name"] == c[0]["name"]:
            same_top1 += 1
        elif cpu_distance.get(g[0]["name"], math.inf) - float(c[0]["distance"]) > tol:
            faults.append(f"{q}: top-1 {g[0]['name']} on CUDA, {c[0]['name']} on the CPU, not a tie")
    figure = (
        f"{n} queries: same top-1 {same_top1}/{n} (the others ties within {tol:g}), same top-10 order "
        f"{same_lists}/{n}, distances within {worst:.1e}"
    )
    if len(answers["cuda"]) != n or worst > tol or faults:
        raise CheckFailedError(
            "; ".join(faults) or "the CUDA server's distances differ from the CPU's", figure
        )
    return figure, {"queries": n, "same_top1": same_top1, "same_lists": same_lists, "distance_diff": worst}


#: Check 8: the CUDA and CPU answers agree this well (cuDNN's TF32 convolutions, on by default,
#: round to 10 bits of mantissa: features agree to about 1e-4 in cosine, distances to a few 1e-3).
FEATURE_COSINE = 0.999
DISTANCE_TOLERANCE = 5e-3


#: Variants of check 9, each ``(label, SOLVER.AMP.ENABLED, MODEL.CHANNELS_LAST)``; upstream has
#: no channels-last setting, so it runs the first two.
THROUGHPUT_VARIANTS = [("fp32", False, None), ("AMP", True, None), ("AMP channels-last", True, True)]


def check_throughput(ctx: Context) -> tuple[str, dict]:
    found: dict[str, dict] = {}
    impls = ["ours"] + (["upstream"] if ctx.args.upstream else [])
    for impl in impls:
        cmd = [sys.executable, os.path.abspath(__file__), "--child-throughput", impl, "--out", ctx.out,
               "--root", ctx.root, "--iters", str(ctx.args.throughput_iters),
               "--workers", str(ctx.args.throughput_workers)]  # fmt: skip
        if impl == "upstream":
            cmd += ["--upstream", upstream_copy(ctx)]
        code, output, _ = run_logged(ctx, f"throughput_{impl}", cmd, timeout=300)
        lines = [x for x in output.splitlines() if x.startswith("THROUGHPUT ")]
        for line in lines:
            result = json.loads(line[len("THROUGHPUT ") :])
            found[f"{impl} {result.pop('variant')}"] = result
        if code != 0 or not lines:
            if impl == "ours":
                raise CheckFailedError(f"our trainer exited {code}: {tail(output)}")
            found[f"{impl}"] = {"error": tail(output)}
    parts = []
    for label, v in found.items():
        if "error" in v:
            parts.append(f"{label}: failed ({v['error'][:160]})")
        else:
            parts.append(
                f"{label} {v['images_per_s']:.0f} img/s (data wait {100 * v['data_share']:.0f} %), "
                f"peak {v['peak_gib']:.1f} GiB"
            )
    return "; ".join(parts), found


def upstream_copy(ctx: Context) -> str:
    """Upstream's package and configs copied beside the run (the checkout itself is never changed)."""
    dest = os.path.join(ctx.out, "upstream")
    if not os.path.isdir(dest):
        for part in ("fastreid", "configs"):
            shutil.copytree(os.path.join(ctx.args.upstream, part), os.path.join(dest, part))
    return dest


class _Timed(Exception):  # noqa: N818 (not an error: the end of a timed run)
    """Raised by the timing hook once its steps are measured: the trainer stops there."""


def child_throughput(args: argparse.Namespace) -> None:
    """One implementation's trainer (ours, or upstream's own ``DefaultTrainer`` from a checkout)
    timed on the synthetic Market-1501 at 256x128, batch 64, in each of its variants; prints one
    ``THROUGHPUT {json}`` line per variant."""
    import collections
    import collections.abc

    upstream = args.child_throughput == "upstream"
    if upstream:
        # The only shim: upstream's 2021 code imports these names from collections (Python < 3.10).
        for name in ("Mapping", "MutableMapping", "Sequence", "Iterable"):
            if not hasattr(collections, name):
                setattr(collections, name, getattr(collections.abc, name))
        sys.path[:] = [args.upstream] + [p for p in sys.path if os.path.abspath(p or ".") != REPO]
    import torch

    from fastreid.config import get_cfg
    from fastreid.engine import DefaultTrainer
    from fastreid.engine.train_loop import HookBase

    root = args.upstream if upstream else REPO
    assert os.path.abspath(sys.modules["fastreid"].__file__).startswith(os.path.abspath(root))
    warmup, timed, batch = 10, args.iters, 64

    class Timer(HookBase):
        def __init__(self) -> None:
            self.times: list[float] = []
            self.data: list[float] = []

        def before_step(self) -> None:
            torch.cuda.synchronize()
            self.t = time.perf_counter()

        def after_step(self) -> None:
            torch.cuda.synchronize()
            self.times.append(time.perf_counter() - self.t)
            with contextlib.suppress(Exception):  # both trainers log data_time; a missing one is 0
                self.data.append(float(self.trainer.storage.history("data_time").latest()))
            if len(self.times) == warmup:
                torch.cuda.reset_peak_memory_stats()
            if len(self.times) == warmup + timed:
                raise _Timed

    os.environ["FASTREID_DATASETS"] = args.root
    for label, amp, channels_last in THROUGHPUT_VARIANTS:
        if upstream and channels_last is not None:
            continue
        out = os.path.join(
            args.out, "scratch", f"throughput_{args.child_throughput}_{label.replace(' ', '_')}"
        )
        cfg = get_cfg()
        cfg.merge_from_file(os.path.join(root, R50_CONFIG))
        opts = ["MODEL.DEVICE", "cuda", "MODEL.BACKBONE.PRETRAIN", False, "INPUT.SIZE_TRAIN", [256, 128],
                "SOLVER.IMS_PER_BATCH", batch, "SOLVER.AMP.ENABLED", amp, "DATALOADER.NUM_WORKERS", args.workers,
                "SOLVER.CHECKPOINT_PERIOD", 1000, "TEST.EVAL_PERIOD", 1000, "SOLVER.MAX_EPOCH", 1000,
                "OUTPUT_DIR", out, "DATASETS.NAMES", ("Market1501",), "DATASETS.TESTS", ("Market1501",)]  # fmt: skip
        if channels_last is not None:
            opts += ["MODEL.CHANNELS_LAST", channels_last]
        cfg.merge_from_list(opts)
        os.makedirs(out, exist_ok=True)  # default_setup makes it; upstream's trainer writes config.yaml there
        before = torch.cuda.memory_allocated()  # what an earlier variant left: not this one's
        timer = Timer()
        trainer = DefaultTrainer(cfg)
        trainer.register_hooks([timer])
        with contextlib.suppress(_Timed):
            trainer.train()
        steps = sorted(timer.times[warmup:])
        if len(steps) < timed:
            raise SystemExit(f"{label}: training ended after {len(timer.times)} steps")
        median = steps[len(steps) // 2]
        data = timer.data[warmup:]
        result = {
            "variant": label,
            "images_per_s": batch / median,
            "median_step_s": median,
            "data_share": (sum(data) / sum(timer.times[warmup:])) if data else 0.0,
            "peak_gib": (torch.cuda.max_memory_allocated() - before) / 2**30,
            "steps": timed,
        }
        print("THROUGHPUT " + json.dumps(result), flush=True)
        del trainer
        torch.cuda.empty_cache()
    os._exit(0)  # loader workers and background threads of the stopped runs: nothing left to save


def check_oom(ctx: Context) -> tuple[str, dict]:
    out = os.path.join(ctx.out, "runs", "10")
    shutil.rmtree(out, ignore_errors=True)
    opts = [*ctx.demo_opts("cuda"), "TEST.EVAL_PERIOD", "0", "SOLVER.MAX_ITER", str(LAUNCH_ITERS)]
    code, output, _ = run_logged(
        ctx, "oom_train", train_cmd(DEMO_CONFIG, out, opts), ctx.args.train_timeout_s
    )
    if code != 0:
        raise CheckFailedError(f"the first run exited {code}: {tail(output)}")
    with open(os.path.join(out, "last_checkpoint"), encoding="utf-8") as f:
        last = os.path.join(out, f.read().strip())
    before = sha256(last)
    huge = [*opts, "SOLVER.MAX_ITER", str(2 * LAUNCH_ITERS), "INPUT.SIZE_TRAIN", "[4096, 2048]",
            "DATALOADER.NUM_WORKERS", "0"]  # fmt: skip
    code, output, wall = run_logged(ctx, "oom_resume", train_cmd(DEMO_CONFIG, out, huge, "--resume"), 300)
    lines = [x for x in output.splitlines() if x.strip()]
    last_line = lines[-1] if lines else ""
    import torch

    intact = sha256(last) == before
    with open(os.path.join(out, "last_checkpoint"), encoding="utf-8") as f:
        still_last = os.path.join(out, f.read().strip()) == last
    loadable = "model" in torch.load(last, map_location="cpu", weights_only=False)
    figure = f"exit {code} after {wall:.0f} s: {last_line[:300]}"
    faults = []
    if code != 1:
        faults.append(f"exit code {code}, not 1")
    if "SOLVER.IMS_PER_BATCH" not in last_line or not re.search(r"\d+(\.\d+)? [KMGT]i?B", last_line):
        faults.append("the last line does not name SOLVER.IMS_PER_BATCH and the memory asked for")
    if "Traceback" in output:
        faults.append("a traceback reached the console")
    if not (intact and still_last and loadable):
        faults.append("the last checkpoint changed or cannot be loaded")
    if faults:
        raise CheckFailedError("; ".join(faults), figure)
    return figure, {"exit_code": code, "message": last_line, "checkpoint_intact": intact}


CHECKS = [
    Check("1", "DataLoaderX CUDA prefetch: same batches; data-wait share", True, check_prefetch),
    Check("2", "pinned memory and non-blocking copies exactly for a CUDA model", True, check_pinned),
    Check(
        "5a",
        "torchrun --nproc_per_node 1 (nccl): train and resume",
        True,
        lambda c: check_torchrun_and_num_gpus(c, "5a"),
    ),  # fmt: skip
    Check("5b", "--num-gpus 1: train and resume", True, lambda c: check_torchrun_and_num_gpus(c, "5b")),
    Check("10", "a batch too large for the GPU: one-line error, checkpoint intact", True, check_oom),
    # the CPU reference trains from the start, beside the checks above
    Check("ref", "CPU reference: the demo trained on the CPU", False, check_reference),
    Check("3a", "demo on the GPU, float32", True, lambda c: gpu_demo(c, "3a", [], None)),
    Check(
        "3b",
        "demo on the GPU, AMP float16 + GradScaler",
        True,
        lambda c: gpu_demo(c, "3b", ["SOLVER.AMP.ENABLED", "True"], "autocast to torch.float16"),
    ),  # fmt: skip
    Check(
        "4",
        "demo on the GPU, bfloat16 autocast",
        True,
        lambda c: gpu_demo(c, "4", ["MODEL.PRECISION", "bf16"], "torch.bfloat16"),
    ),  # fmt: skip
    Check("6", "evaluation from GPU features equals the CPU's (re-ranking too)", True, check_eval),
    Check("7", "ONNX and TorchScript export from a CUDA model", True, check_export),
    Check("8a", "fastreid-extract --device cuda answers like the CPU", True, check_extract),
    Check("8b", "fastreid-serve --device cuda answers like the CPU", True, check_serve),
    Check("9", "throughput: bagtricks R50 256x128, batch 64, fp32 and AMP", True, check_throughput),
]


# ----------------------------------------------------------------------------------------------
# the run
# ----------------------------------------------------------------------------------------------
def environment(ctx: Context) -> dict:
    import torch

    env = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "cpu": _cpu_name(),
        "cpu_count": os.cpu_count(),
    }
    if ctx.cuda:
        props = torch.cuda.get_device_properties(0)
        env.update(gpu=props.name, gpu_memory_gib=round(props.total_memory / 2**30, 1),
                   cudnn=torch.backends.cudnn.version(), driver=_driver_version())  # fmt: skip
    return env


def _cpu_name() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _driver_version() -> str:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20, check=True,
        )  # fmt: skip
        return out.stdout.strip().splitlines()[0]
    return "?"


def ensure_data(ctx: Context) -> None:
    from fastreid.data.synthetic.persons import FOLDER, SyntheticSpec, generate_market1501

    train = os.path.join(ctx.root, FOLDER, "bounding_box_train")
    if os.path.isdir(train) and os.listdir(train):
        return
    spec = SyntheticSpec.small(seed=3) if ctx.args.small else SyntheticSpec()
    generate_market1501(ctx.root, spec, overwrite=False)


def run_checks(ctx: Context) -> list[Row]:
    only = set(filter(None, (ctx.args.only or "").split(",")))
    if not ctx.args.cpu_reference and (not only or "ref" in only):
        start_reference(ctx)  # on the CPU, beside the first GPU checks
    rows = []
    for check in CHECKS:
        if only and check.id not in only:
            continue
        start = time.perf_counter()
        row = Row(check.id, check.name, SKIP)
        if check.cuda and not ctx.cuda:
            row.reason = NO_CUDA
        elif ctx.left_s() <= 0:
            row.reason = f"the time budget ({ctx.args.budget_s:.0f} s, --budget-s) is spent"
        else:
            try:
                row.figure, row.data = check.run(ctx)
                row.status = PASS
            except CannotRunError as e:
                row.reason = str(e)
            except CheckFailedError as e:
                row.status, row.reason, row.figure = FAIL, str(e), e.figure
            except Exception as e:  # a bug in the package or here: the row says which, the log keeps it
                row.status, row.reason = FAIL, f"{type(e).__name__}: {e}"
                row.data = {"traceback": traceback.format_exc()}
        row.seconds = round(time.perf_counter() - start, 1)
        print(format_row(row), flush=True)
        rows.append(row)
    return rows


def format_row(row: Row) -> str:
    text = row.figure if row.status == PASS else "; ".join(filter(None, [row.reason, row.figure]))
    return f"| {row.id} | {row.name} | {row.status} | {text} | {row.seconds:.0f} |"


def write_outputs(ctx: Context, env: dict, rows: list[Row]) -> str:
    os.makedirs(ctx.out, exist_ok=True)
    report = {"environment": env, "rows": [dataclasses.asdict(r) for r in rows]}
    path = os.path.join(ctx.out, "gpu_check.json")
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1, default=str)
    os.replace(path + ".tmp", path)
    with open(os.path.join(ctx.out, "gpu_check.md"), "w", encoding="utf-8") as f:
        f.write(table(env, rows))
    return path


def table(env: dict, rows: list[Row]) -> str:
    head = ", ".join(f"{k} {v}" for k, v in env.items())
    lines = [head, "", "| check | what | result | figure / reason | s |", "| --- | --- | --- | --- | ---: |"]
    return "\n".join(lines + [format_row(r) for r in rows]) + "\n"


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="logs/gpu_check", help="folder of the runs, logs and gpu_check.json")
    p.add_argument(
        "--root", default="", help="datasets root (default <out>/datasets; generated when missing)"
    )
    p.add_argument("--cpu-reference", default="", help="gpu_check.json of an earlier run: its CPU reference")
    p.add_argument(
        "--upstream", default="", help="upstream FastReID checkout: its trainer beside ours in check 9"
    )
    p.add_argument("--only", default="", help="comma-separated check ids (e.g. ref,1,2)")
    p.add_argument("--budget-s", type=float, default=480.0, help="checks not started by then are SKIP")
    p.add_argument("--epochs", type=int, default=10, help="demo epochs (the demo config's 10)")
    p.add_argument("--workers", type=int, default=4, help="loader processes of the GPU demo runs")
    p.add_argument("--small", action="store_true", help="a tiny synthetic set (for the suite's test)")
    p.add_argument("--train-timeout-s", type=float, default=300.0)
    p.add_argument("--loader-batches", type=int, default=20)
    p.add_argument("--wait-steps", type=int, default=40)
    p.add_argument("--serve-queries", type=int, default=8)
    p.add_argument("--throughput-iters", type=int, default=30)
    p.add_argument("--throughput-workers", type=int, default=8)
    p.add_argument("--demo-opts", nargs="*", default=[], help="extra KEY VALUE overrides of every demo run")
    p.add_argument("--child-throughput", choices=("ours", "upstream"), help=argparse.SUPPRESS)
    p.add_argument("--amp", default="0", help=argparse.SUPPRESS)
    p.add_argument("--iters", type=int, default=30, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(argv)
    if args.child_throughput:
        child_throughput(args)
        return 0
    ctx = Context(args)
    os.environ["FASTREID_DATASETS"] = ctx.root  # the loaders this process builds (checks 1, 2, 6)
    os.makedirs(ctx.out, exist_ok=True)
    env = environment(ctx)
    print(", ".join(f"{k} {v}" for k, v in env.items()), flush=True)
    if not ctx.cuda:
        print(f"No CUDA here: every CUDA check is SKIP; the CPU reference runs ({NO_CUDA})", flush=True)
    ensure_data(ctx)
    print("| check | what | result | figure / reason | s |\n| --- | --- | --- | --- | ---: |", flush=True)
    try:
        rows = run_checks(ctx)
    finally:
        if ctx.reference_run is not None and ctx.reference_run.proc.poll() is None:
            os.killpg(ctx.reference_run.proc.pid, signal.SIGKILL)  # its row never ran (--only)
    path = write_outputs(ctx, env, rows)
    failed = [r.id for r in rows if r.status == FAIL]
    counts = {s: sum(r.status == s for r in rows) for s in (PASS, FAIL, SKIP)}
    print(f"{counts[PASS]} PASS, {counts[FAIL]} FAIL, {counts[SKIP]} SKIP in {time.monotonic() - ctx.started:.0f} s; "
          f"{path}" + (f"; failed: {', '.join(failed)}" if failed else ""), flush=True)  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
