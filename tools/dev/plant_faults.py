#!/usr/bin/env python
"""Plant one-line faults in core modules, one at a time, and check that the suite's tests of each
module fail: a suite made faster must still catch what it caught.

Each fault replaces one line of the package in a scratch worktree of ``HEAD`` (this checkout is
never touched) and runs the test files that cover that module with pytest-xdist. A fault the tests
do not catch is a hole; the table says which.

    python tools/dev/plant_faults.py              # every fault
    python tools/dev/plant_faults.py sampler loss  # some of them
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclasses.dataclass(frozen=True)
class Fault:
    name: str
    path: str  # in the package
    old: str  # exactly once in the file
    new: str
    tests: tuple[str, ...]  # the suite's test files of that module


FAULTS = [
    Fault("sampler", "fastreid/data/samplers/triplet_sampler.py",
          "size=P, replace=False)]", "size=P, replace=True)]",
          ("tests/data/test_samplers.py", "tests/data/test_same_batches.py")),
    Fault("evaluator", "fastreid/evaluation/rank.py",
          "self._ap.append(ap_sum[valid] / m)", "self._ap.append(ap_sum[valid] / (m + 1))",
          ("tests/evaluation/test_rank.py", "tests/evaluation/test_evaluation_upstream_parity.py")),
    Fault("checkpoint", "fastreid/utils/checkpoint.py",
          "self.tag_last_checkpoint(basename)", "pass",
          ("tests/engine/test_hooks_and_checkpointer.py", "tests/engine/test_checkpoint_atomic.py")),
    Fault("loader policy", "fastreid/data/loading/rules.py",
          "d.pin = bool(d.request.pin_memory) and on_cuda", "d.pin = bool(d.request.pin_memory)",
          ("tests/data/test_loader_policy.py",)),
    Fault("config merge", "fastreid/config/config.py",
          "    _merge_dicts(loaded, merged, filename)\n", "    _merge_dicts({}, merged, filename)\n",
          ("tests/config",)),
    Fault("transforms", "fastreid/data/transforms/transforms.py",
          "return img.flip(-1) if chance(g, self.p) else img", "return img.flip(-2) if chance(g, self.p) else img",
          ("tests/data/test_transforms.py", "tests/data/test_upstream_transforms.py")),
    Fault("loss", "fastreid/modeling/losses/triplet_loss.py",
          "return F.margin_ranking_loss(dist_an, dist_ap, y, margin=margin)",
          "return F.margin_ranking_loss(dist_ap, dist_an, y, margin=margin)",
          ("tests/modeling/test_losses.py",)),
    Fault("export", "fastreid/inference/export.py",
          "if not result.scaled_diff <= tolerance:", "if not result.scaled_diff <= tolerance * 1e6:",
          ("tests/inference/test_export.py",)),
    Fault("search", "fastreid/inference/search.py",
          'return (1.0 - scores if metric == "cosine" else scores)', 'return (1.0 + scores if metric == "cosine" else scores)',
          ("tests/inference/test_search.py",)),
    Fault("serve", "fastreid/serve/uploads.py",
          "if len(self._data) + len(chunk) > self.max_bytes:", "if len(self._data) + len(chunk) > 2 * self.max_bytes:",
          ("tests/serve/test_serve_uploads.py", "tests/serve/test_serve_app.py")),
    Fault("pseudo labels", "fastreid/utils/kreciprocal/sparse_jaccard.py",
          "keep = dist <= limit", "keep = dist < limit",
          ("tests/uda", "tests/utils/test_kreciprocal_graph.py")),
    Fault("cross-rank gather", "fastreid/utils/comm.py",
          "return torch.cat(parts) if rank == dst else None", "return torch.cat(parts[::-1]) if rank == dst else None",
          ("tests/evaluation/test_distributed_gather.py",)),
    Fault("all-gather gradients", "fastreid/layers/gather_layer.py",
          "        dist.all_reduce(all_grads)\n", "        pass\n",
          ("tests/layers/test_layer_distributions.py",)),
]  # fmt: skip


def plant(fault: Fault, jobs: int) -> dict:
    """Plant ``fault`` in a scratch worktree of HEAD and run its tests; what happened."""
    scratch = tempfile.mkdtemp(prefix="fastreid-fault-")
    tree = os.path.join(scratch, "tree")
    subprocess.run(["git", "-C", REPO, "worktree", "add", "--detach", "-q", tree, "HEAD"], check=True)
    try:
        path = os.path.join(tree, fault.path)
        if not os.path.exists(path):
            return {"fault": fault.name, "caught": None, "why": f"{fault.path} does not exist"}
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if text.count(fault.old) != 1:
            return {
                "fault": fault.name,
                "caught": None,
                "why": f"the line is in {fault.path} {text.count(fault.old)} times",
            }
        with open(path, "w", encoding="utf-8") as f:
            f.write(text.replace(fault.old, fault.new))
        tests = [t for t in fault.tests if os.path.exists(os.path.join(tree, t))]
        cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "--basetemp",
               os.path.join(scratch, "tmp"), *(["-n", str(jobs)] if jobs > 1 else []), *tests]  # fmt: skip
        env = dict(os.environ, PYTHONPATH=tree)
        start = time.perf_counter()
        done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
        failed = [line for line in done.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
        return {
            "fault": fault.name,
            "file": fault.path,
            "tests": tests,
            "caught": done.returncode != 0 and bool(failed),
            "exit": done.returncode,
            "failed": failed[:3],
            "seconds": round(time.perf_counter() - start, 1),
        }
    finally:
        subprocess.run(["git", "-C", REPO, "worktree", "remove", "--force", tree], check=False)
        shutil.rmtree(scratch, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"faults to plant (default all): {[f.name for f in FAULTS]}")
    parser.add_argument("--jobs", type=int, default=2, help="pytest-xdist workers")
    parser.add_argument("--json", default="", help="also write the results here")
    args = parser.parse_args(argv)
    chosen = [f for f in FAULTS if not args.names or f.name in args.names]
    results = []
    for fault in chosen:
        result = plant(fault, args.jobs)
        results.append(result)
        verdict = {True: "caught", False: "NOT CAUGHT", None: "not planted"}[result["caught"]]
        detail = result.get("why") or (
            result["failed"][0] if result.get("failed") else f"exit {result['exit']}"
        )
        print(
            f"| {fault.name} | {fault.path} | {verdict} | {detail} | {result.get('seconds', 0):.0f} s |",
            flush=True,
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
    return 0 if all(r["caught"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
