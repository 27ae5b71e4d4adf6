"""Every inference path side by side: images/s of the model's forward pass and Rank-1/mAP of the
features each path gives on the same query/gallery, in one run.

Paths (each skipped with a line saying why when it cannot run here):

- ``torch fp32 eager``: the model as built (``MODEL.PRECISION fp32``, no BatchNorm folding, the
  default memory format): the baseline;
- ``torch fp32 folded + channels_last``: what the evaluation and ``FeatureExtractor`` run by default
  on a CPU without native bfloat16;
- ``torch bf16``: bfloat16 autocast on that copy, where the CPU computes bfloat16 natively (the
  default there);
- ``onnxruntime fp32`` / ``onnxruntime int8``: ``fastreid-export --format onnx --dynamic-batch
  --quantize int8`` (the int8 model calibrated on training images), run by ONNX Runtime;
- ``openvino fp32`` / ``openvino int8``: the same two files compiled by OpenVINO (``pip install
  openvino``).

Speed: one batch of ``--batch`` test-transformed images, each path called in turn, round after
round (``--rounds``), median per path: images/s and the ratio to fp32 eager. Accuracy: each path
extracts the config's test set (``DATASETS.TESTS[0]`` under ``$FASTREID_DATASETS``, through
``FeatureExtractor``, the same decoding and resizing for all) and the evaluation's ranking gives
Rank-1/mAP; the cosine of each path's features to fp32 eager's is computed in float64.

    python benchmarks/backends.py --config-file logs/demo/config.yaml --weights logs/demo/model_final.pth
    python benchmarks/backends.py --config-file configs/Market1501/bagtricks_R50.yml --no-accuracy \\
        MODEL.BACKBONE.PRETRAIN False INPUT.SIZE_TEST [256,128]         # speed only, random weights
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import torch  # noqa: E402  (after the checkout is on sys.path, like the other benchmarks)

EXPORT = os.path.join(ROOT, "tools", "deploy", "export.py")


def cpu_line() -> str:
    from fastreid.utils.platform import cpu_flags
    from fastreid.utils.precision import describe_cpu

    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    wanted = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_bf16", "amx_int8")
    flags = sorted(f for f in cpu_flags() if f in wanted)
    return f"{model}; flags: {' '.join(flags) or 'none of ' + '/'.join(wanted)}; bfloat16: {describe_cpu()}"


def export(config_file: str, weights: str, folder: str, opts: list[str], calib_images: int) -> dict[str, str]:
    """fp32 and int8 ONNX files, written by the export command as a user runs it."""
    fp32 = os.path.join(folder, "model.onnx")
    cmd = [sys.executable, EXPORT, "--config-file", config_file, "--format", "onnx", "--dynamic-batch",
           "--output", fp32, "--quantize", "int8", "--calib-images", str(calib_images),
           "--max-map-drop", "100", *opts, "MODEL.WEIGHTS", weights]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"export failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    for line in proc.stdout.splitlines() + proc.stderr.splitlines():
        if "int8" in line and ("mAP" in line or "Rank-1" in line):
            print(f"  export: {line.strip()}")
    return {"fp32": fp32, "int8": os.path.join(folder, "model_int8.onnx")}


def build_paths(config_file, weights, opts, files, skip_exported):
    from fastreid.inference import FeatureExtractor
    from fastreid.utils.errors import UserError
    from fastreid.utils.precision import native_bf16

    eager = ["TEST.FOLD_BN", "False", "MODEL.CHANNELS_LAST", "False", "MODEL.PRECISION", "fp32"]
    paths = {
        "torch fp32 eager": {"opts": opts + eager},
        "torch fp32 folded + channels_last": {"opts": opts + ["MODEL.PRECISION", "fp32"]},
    }
    native, fact = native_bf16()
    if native:
        paths["torch bf16"] = {"opts": opts + ["MODEL.PRECISION", "bf16"]}
    else:
        print(f"  torch bf16: skipped ({fact}: it would be emulated)")
    if not skip_exported:
        for engine in ("onnxruntime", "openvino"):
            for kind in ("fp32", "int8"):
                paths[f"{engine} {kind}"] = {"opts": opts, "backend": engine, "model_file": files[kind]}
    built = {}
    for name, kwargs in paths.items():
        try:
            built[name] = FeatureExtractor(config_file=config_file, weights=weights, device="cpu", **kwargs)
        except UserError as e:  # an engine not installed, or one that cannot run this file
            print(f"  {name}: skipped ({e})")
    return built


def time_paths(extractors: dict, batch: torch.Tensor, rounds: int) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name in extractors}
    with torch.inference_mode():
        for ex in extractors.values():  # warm-up: first calls allocate and pick kernels
            ex.backend(batch)
            ex.backend(batch)
        for _ in range(rounds):
            for name, ex in extractors.items():
                start = time.perf_counter()
                ex.backend(batch)
                times[name].append(time.perf_counter() - start)
    return {name: len(batch) / statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config-file", required=True)
    parser.add_argument("--weights", default=None, help="a trained checkpoint (without: random weights)")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calib-images", type=int, default=256)
    parser.add_argument("--no-accuracy", action="store_true", help="speed only (e.g. random weights)")
    parser.add_argument("--no-export", action="store_true", help="the torch paths only")
    parser.add_argument("opts", nargs=argparse.REMAINDER, help="config overrides: KEY VALUE ...")
    args = parser.parse_args()

    from fastreid.inference.accuracy import cosine_to, labelled_test_set, retrieval_metrics

    print(f"CPU: {cpu_line()}")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; load average {os.getloadavg()}")
    opts = list(args.opts)
    with tempfile.TemporaryDirectory(prefix="fastreid-backends-") as folder:
        weights = args.weights
        if weights is None:
            from fastreid.config import get_cfg
            from fastreid.modeling import build_model
            from fastreid.utils.checkpoint import Checkpointer

            cfg = get_cfg()
            cfg.merge_from_file(args.config_file)
            cfg.merge_from_list(opts + ["MODEL.DEVICE", "cpu"])
            weights = os.path.join(folder, "random.pth")
            Checkpointer.write(weights, {"model": build_model(cfg).state_dict()})
            print("  random weights: speed only (metrics of an untrained model mean nothing)")
            args.no_accuracy = True
        files = {} if args.no_export else export(args.config_file, weights, folder, opts, args.calib_images)
        extractors = build_paths(args.config_file, weights, opts, files, args.no_export)
        baseline = next(iter(extractors.values()))
        if args.no_accuracy:
            gen = torch.Generator().manual_seed(0)
            h, w = baseline.cfg.INPUT.SIZE_TEST
            batch = torch.randint(0, 256, (args.batch, 3, h, w), generator=gen, dtype=torch.uint8)
            query = gallery = None
        else:
            query, gallery, where = labelled_test_set(baseline.cfg)
            print(f"  test set: {where}: {len(query)} query, {len(gallery)} gallery images")
            batch = baseline.preprocess(query.paths[: args.batch])
        print(f"  batch {tuple(batch.shape)}, {args.rounds} rounds")
        speed = time_paths(extractors, batch, args.rounds)

        base_speed = speed["torch fp32 eager"]
        header = "| path | images/s | vs fp32 eager |"
        rule = "|---|---|---|"
        if not args.no_accuracy:
            header += " Rank-1 | mAP | min cosine to fp32 eager |"
            rule += "---|---|---|"
        print(header)
        print(rule)
        reference = None
        for name, ex in extractors.items():
            row = f"| {name} | {speed[name]:.1f} | {speed[name] / base_speed:.2f}x |"
            if not args.no_accuracy:
                result = retrieval_metrics(ex, query, gallery)
                if reference is None:
                    reference = result.features
                low, _ = cosine_to(reference, result.features)
                row += f" {result.metrics['Rank-1']:.2f} | {result.metrics['mAP']:.2f} | {low:.5f} |"
            print(row, flush=True)


if __name__ == "__main__":
    main()
