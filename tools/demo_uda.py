#!/usr/bin/env python
"""``make demo-uda``: domain adaptation on a CPU in a few minutes, no download (docs/uda.md).

1. make the two synthetic domains under ``--root`` (each kept when it already exists): A, the
   synthetic Market-1501; B, the synthetic DukeMTMC-reID (other scenes, light, palette, cameras);
2. train the source model on A's labels (``configs/UDA/demo_source.yml``), evaluated on B:
   **direct transfer**;
3. adapt it to B's training images without their identities (``configs/UDA/demo_adapt.yml``,
   Cluster Contrast from the source's ``model_final.pth``), evaluated on B: **adapted**;
4. train the same model on B's labels (``configs/UDA/demo_supervised.yml``): **supervised**, the
   upper bound;
5. print the three side by side.

Each step is the standard command (``tools/train_net.py --config-file ...``) in a folder of its own
under ``--output``, its console output in ``<step>.console.txt`` there.

    python tools/demo_uda.py --root datasets --output logs/demo_uda/<time> [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from fastreid.utils.errors import UserError, run_tool  # noqa: E402  (the checkout first on the path)

STEPS = 5
RESULTS = "evaluation_results.json"  # what each run's final evaluation writes (ReidEvaluator)


class DemoStepError(UserError):
    """A training step of the demo failed; the message names its console output."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--root",
        default=os.environ.get("FASTREID_DATASETS", "datasets"),
        help="datasets folder: <root>/Market-1501-v15.09.15 (domain A) and <root>/DukeMTMC-reID (domain B)",
    )
    parser.add_argument("--output", default="logs/demo_uda", help="a folder for the three runs")
    parser.add_argument("--seed", type=int, default=42, help="SEED of the three runs (not of the data)")
    parser.add_argument(
        "opts", nargs=argparse.REMAINDER, help="config overrides for every run (KEY VALUE ...)"
    )
    return parser.parse_args(argv)


def banner(n: int, text: str, start: float) -> None:
    print(f"\n=== [{n}/{STEPS}] {text}  (t={time.perf_counter() - start:.0f}s)", flush=True)


def ensure_domains(root: str) -> list[str]:
    """Domain A and domain B under ``root``, each generated (default sizes) when missing."""
    from fastreid.data.synthetic.persons import DOMAINS, SyntheticSpec, generate_persons

    folders = []
    for name in ("A", "B"):
        folder = os.path.join(root, DOMAINS[name].folder)
        train = os.path.join(folder, "bounding_box_train")
        if os.path.isdir(train) and any(n.endswith(".jpg") for n in os.listdir(train)):
            print(f"domain {name}: using the existing {folder}", flush=True)
        else:
            print(f"domain {name}: generating {DOMAINS[name].what} in {folder} ...", flush=True)
            generate_persons(root, SyntheticSpec(), name, verbose=True)
        folders.append(folder)
    return folders


def train(config: str, output: str, name: str, opts: list[str]) -> dict[str, float]:
    """``tools/train_net.py --config-file config`` into ``output/name``; its final evaluation."""
    out = os.path.join(output, name)
    console = os.path.join(output, f"{name}.console.txt")
    cmd = [sys.executable, os.path.join(REPO, "tools", "train_net.py"), "--config-file", config]
    cmd += [*opts, "OUTPUT_DIR", out]
    print(" ".join(cmd), flush=True)
    with open(console, "w", encoding="utf-8") as f:
        done = subprocess.run(cmd, cwd=REPO, stdout=f, stderr=subprocess.STDOUT, env=os.environ.copy())
    if done.returncode != 0:
        with open(console, encoding="utf-8", errors="replace") as f:
            last = [line for line in f.read().splitlines() if line.strip()][-1:]
        raise DemoStepError(
            f"the {name} run failed (exit {done.returncode}): {last[0] if last else ''} (all of it: {console})"
        )
    with open(os.path.join(out, RESULTS), encoding="utf-8") as f:
        return {k: float(v) for k, v in json.load(f).items() if isinstance(v, (int, float))}


def table(rows: list[tuple[str, dict[str, float]]]) -> str:
    from tabulate import tabulate

    body = [[name, res.get("Rank-1", float("nan")), res.get("mAP", float("nan"))] for name, res in rows]
    return tabulate(
        body, headers=["model, evaluated on domain B", "Rank-1", "mAP"], tablefmt="pipe", floatfmt=".1f"
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.makedirs(args.output, exist_ok=True)
    os.environ["FASTREID_DATASETS"] = os.path.abspath(args.root)
    configs = os.path.join(REPO, "configs", "UDA")
    opts = ["SEED", str(args.seed), *args.opts]
    start = time.perf_counter()

    banner(1, "The two synthetic domains", start)
    ensure_domains(args.root)

    banner(2, "Source model: domain A's labels, evaluated on domain B (direct transfer)", start)
    direct = train(os.path.join(configs, "demo_source.yml"), args.output, "source", opts)

    banner(3, "Adapted: Cluster Contrast on domain B's images, without their identities", start)
    weights = os.path.join(args.output, "source", "model_final.pth")
    adapted = train(
        os.path.join(configs, "demo_adapt.yml"), args.output, "adapted", [*opts, "MODEL.WEIGHTS", weights]
    )

    banner(4, "Upper bound: the source's model and schedule on domain B's labels", start)
    supervised = train(os.path.join(configs, "demo_supervised.yml"), args.output, "supervised", opts)

    banner(5, "Summary", start)
    out = os.path.abspath(args.output)
    print(f"runs            : {out}/{{source,adapted,supervised}} (each with report.html)")
    print(f"total time      : {time.perf_counter() - start:.0f} s")
    gain = adapted.get("mAP", float("nan")) - direct.get("mAP", float("nan"))
    print(f"adapted - direct transfer: {gain:+.1f} mAP points (seed {args.seed})\n")
    rows = [
        ("direct transfer (domain A's labels)", direct),
        ("adapted (+ domain B's images, no labels)", adapted),
        ("supervised (domain B's labels)", supervised),
    ]
    print(table(rows), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run_tool(main))
